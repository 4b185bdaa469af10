"""Observed messages and the sessions they form, on PostgreSQL: SQL only, one transaction per call.

The extraction jobs that read them are in ``extraction_jobs.py``; a session's job comes due
``extract_after_ms`` after its latest message (each observe pushes it back: the debounce).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

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
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres.conversations import episodes as episodes_store

Conn = psycopg.Connection[Any]
PRUNE_BATCH = 5000


def observe(
    conn: Conn,
    session: SessionRef,
    context: SessionContext,
    messages: Sequence[StoredMessage],
    now_ms: int,
    due_at_ms: int | None,
    episodes: bool = False,
) -> int:
    key = session.key
    with conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO observed_messages (session, {MESSAGE_FIELDS}, received_at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [message_values(key, m, now_ms) for m in messages],
        )
    conn.execute(
        "DELETE FROM observed_messages WHERE session = %s AND seq <= ("
        "SELECT seq FROM observed_messages WHERE session = %s ORDER BY seq DESC LIMIT 1 OFFSET %s)",
        (key, key, MAX_SESSION_MESSAGES),
    )
    if due_at_ms is not None:
        conn.execute(
            "INSERT INTO extraction_jobs (session, owner, chat_id, session_key, chat_type, timezone, speaker_username, "
            "speaker_display_name, done_seq, due_at_ms, updated_at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
            "coalesce((SELECT max(seq) FROM observed_messages WHERE session = %s) - %s, 0), %s, %s) "
            "ON CONFLICT (session) DO UPDATE SET chat_type = coalesce(excluded.chat_type, extraction_jobs.chat_type), "
            "timezone = coalesce(excluded.timezone, extraction_jobs.timezone), "
            "speaker_username = coalesce(excluded.speaker_username, extraction_jobs.speaker_username), "
            "speaker_display_name = coalesce(excluded.speaker_display_name, extraction_jobs.speaker_display_name), "
            "due_at_ms = excluded.due_at_ms, updated_at_ms = excluded.updated_at_ms",
            (key, session.owner, session.chat_id, session.session_key, context.chat_type, context.timezone,
             context.speaker_username, context.speaker_display_name, key, len(messages), due_at_ms, now_ms),
        )  # fmt: skip
        job_rows.notify(conn)
    if episodes:
        episodes_store.add(conn, session, context, messages, now_ms)
    return len(messages)


def queued_extractions(conn: Conn, session: SessionRef) -> tuple[int, bool]:
    """(how many of the session owner's sessions wait for extraction, whether ``session`` is
    one of them)."""
    row = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE session = %s) FROM extraction_jobs "
        "WHERE owner = %s AND due_at_ms IS NOT NULL AND parked_at_ms IS NULL",
        (session.key, session.owner),
    ).fetchone() or (0, 0)
    return int(row[0]), int(row[1]) > 0


def session_messages(conn: Conn, session: SessionRef, limit: int) -> list[StoredMessage]:
    found = conn.execute(
        f"SELECT * FROM (SELECT {MESSAGE_COLUMNS} FROM observed_messages WHERE session = %s ORDER BY seq DESC LIMIT %s) AS t ORDER BY seq",
        (session.key, limit),
    ).fetchall()
    return [message_from_row(row) for row in found]


def messages_remain(conn: Conn, read: MessagesRead) -> bool:
    """Whether every message ``read`` names is still stored (none erased or pruned since)."""
    row = conn.execute(
        "SELECT count(*) FROM observed_messages WHERE session = %s AND seq = ANY(%s)",
        (read.session.key, list(read.seqs)),
    ).fetchone()
    return row is not None and int(row[0]) == len(read.seqs)


def window(
    conn: Conn, session: SessionRef, message_id: str, radius: int
) -> tuple[SessionRef, list[StoredMessage]] | None:
    bounds: tuple[str, ...]
    if session.session_key is not None:
        where, bounds = "session = %s", (session.key,)
    else:
        where, bounds = "session >= %s AND session < %s", key_range(session.owner, session.chat_id)
    row = conn.execute(
        f"SELECT session, seq FROM observed_messages WHERE message_id = %s AND {where} ORDER BY seq DESC LIMIT 1",
        (message_id, *bounds),
    ).fetchone()
    if row is None:
        return None
    key, seq = row
    before = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM observed_messages WHERE session = %s AND seq <= %s ORDER BY seq DESC LIMIT %s",
        (key, seq, radius + 1),
    ).fetchall()
    after = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM observed_messages WHERE session = %s AND seq > %s ORDER BY seq LIMIT %s",
        (key, seq, radius),
    ).fetchall()
    return window_of(key, before, after)


def prune(conn: Conn, cutoff_ms: int) -> int:
    removed = conn.execute(
        "DELETE FROM observed_messages WHERE (session, seq) IN (SELECT session, seq FROM observed_messages "
        "WHERE received_at_ms < %s ORDER BY received_at_ms LIMIT %s)",
        (cutoff_ms, PRUNE_BATCH),
    ).rowcount
    conn.execute(
        "DELETE FROM extraction_jobs WHERE leased_until_ms IS NULL AND NOT EXISTS "
        "(SELECT 1 FROM observed_messages AS m WHERE m.session = extraction_jobs.session)"
    )
    return int(removed)
