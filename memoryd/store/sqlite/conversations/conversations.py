"""Observed messages and the sessions they form (schema m004): SQL only, one transaction per call.

The extraction jobs that read them are in ``extraction_jobs.py``.

A session is (owner, chat, session key).  ``observe`` stores messages and pushes the
session's job due time to "now + debounce", so a job comes due only once the session has
been quiet that long.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from memoryd.store.conversation_records import (
    MESSAGE_COLUMNS,
    MESSAGE_FIELDS,
    MessagesRead,
    SessionContext,
    SessionRef,
    StoredMessage,
    message_from_row,
    message_values,
)
from memoryd.store.conversation_rules import MAX_SESSION_MESSAGES, key_range, window_of
from memoryd.store.sqlite.db.database import rows_changed

#: Rows one retention step removes (one short write transaction each).
PRUNE_BATCH = 5000


def observe(
    db: apsw.Connection,
    session: SessionRef,
    context: SessionContext,
    messages: Sequence[StoredMessage],
    now_ms: int,
    *,
    due_at_ms: int | None,
) -> int:
    """Store ``messages`` (their ``seq`` is ignored); with ``due_at_ms``, (re)schedule the
    session's extraction then.  Returns how many were stored."""
    key = session.key
    db.executemany(
        f"INSERT INTO observed_messages (session, {MESSAGE_FIELDS}, received_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [message_values(key, m, now_ms) for m in messages],
    )
    db.execute(
        "DELETE FROM observed_messages WHERE session = ? AND seq <= ("
        "SELECT seq FROM observed_messages WHERE session = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
        (key, key, MAX_SESSION_MESSAGES),
    )
    if due_at_ms is not None:
        db.execute(
            """
            INSERT INTO extraction_jobs (session, owner, chat_id, session_key, chat_type, timezone,
                speaker_username, speaker_display_name, done_seq, due_at_ms, updated_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?,
                coalesce((SELECT max(seq) FROM observed_messages WHERE session = ?1) - ?9, 0), ?10, ?11)
            ON CONFLICT (session) DO UPDATE SET
                chat_type = coalesce(excluded.chat_type, chat_type),
                timezone = coalesce(excluded.timezone, timezone),
                speaker_username = coalesce(excluded.speaker_username, speaker_username),
                speaker_display_name = coalesce(excluded.speaker_display_name, speaker_display_name),
                due_at_ms = excluded.due_at_ms,
                updated_at_ms = excluded.updated_at_ms
            """,
            (
                key,
                session.owner,
                session.chat_id,
                session.session_key,
                context.chat_type,
                context.timezone,
                context.speaker_username,
                context.speaker_display_name,
                len(messages),
                due_at_ms,
                now_ms,
            ),
        )
    return len(messages)


def queued_extractions(db: apsw.Connection, session: SessionRef) -> tuple[int, bool]:
    """(how many of the session owner's sessions wait for extraction, whether ``session`` is
    one of them).  Session keys are JSON [owner, chat, key], so one owner's are a key range."""
    row = db.execute(
        "SELECT count(*) FROM extraction_jobs WHERE session >= ? AND session < ? "
        "AND due_at_ms IS NOT NULL AND parked_at_ms IS NULL",
        key_range(session.owner),
    ).fetchone()
    this = db.execute(
        "SELECT 1 FROM extraction_jobs WHERE session = ? AND due_at_ms IS NOT NULL AND parked_at_ms IS NULL",
        (session.key,),
    ).fetchone()
    return int(row[0]), this is not None


def session_messages(db: apsw.Connection, session: SessionRef, limit: int) -> list[StoredMessage]:
    """The newest ``limit`` messages of a session, oldest first."""
    rows = db.execute(
        f"SELECT * FROM (SELECT {MESSAGE_COLUMNS} FROM observed_messages WHERE session = ? "
        "ORDER BY seq DESC LIMIT ?) ORDER BY seq",
        (session.key, limit),
    ).fetchall()
    return [message_from_row(row) for row in rows]


def window(
    db: apsw.Connection, session: SessionRef, message_id: str, radius: int
) -> tuple[SessionRef, list[StoredMessage]] | None:
    """The message ``message_id`` with ``radius`` messages either side, in ``session`` or, when
    its ``session_key`` is None, in the newest session of the same owner and chat that has it."""
    if session.session_key is not None:
        where, bounds = "session = ?", (session.key,)
    else:
        where, bounds = "session >= ? AND session < ?", key_range(session.owner, session.chat_id)
    row = db.execute(
        f"SELECT session, seq FROM observed_messages WHERE message_id = ? AND {where} ORDER BY seq DESC LIMIT 1",
        (message_id, *bounds),
    ).fetchone()
    if row is None:
        return None
    key, seq = row
    before = db.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM observed_messages WHERE session = ? AND seq <= ? ORDER BY seq DESC LIMIT ?",
        (key, seq, radius + 1),
    ).fetchall()
    after = db.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM observed_messages WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?",
        (key, seq, radius),
    ).fetchall()
    return window_of(key, before, after)


def messages_remain(db: apsw.Connection, read: MessagesRead) -> bool:
    """Whether every message ``read`` names is still stored (none erased or pruned since)."""
    placeholders = ", ".join("?" * len(read.seqs))
    (found,) = db.execute(
        f"SELECT count(*) FROM observed_messages WHERE session = ? AND seq IN ({placeholders})",
        (read.session.key, *read.seqs),
    ).fetchone()
    return int(found) == len(read.seqs)


def prune(db: apsw.Connection, cutoff_ms: int) -> int:
    """One batch of retention: messages received before ``cutoff_ms``; then the jobs of
    sessions left without messages (nothing more can come of them)."""
    removed = rows_changed(
        db,
        "DELETE FROM observed_messages WHERE seq IN (SELECT seq FROM observed_messages "
        "WHERE received_at_ms < ? ORDER BY received_at_ms LIMIT ?)",
        (cutoff_ms, PRUNE_BATCH),
    )
    db.execute(
        "DELETE FROM extraction_jobs WHERE leased_until_ms IS NULL AND NOT EXISTS "
        "(SELECT 1 FROM observed_messages AS m WHERE m.session = extraction_jobs.session)"
    )
    return removed
