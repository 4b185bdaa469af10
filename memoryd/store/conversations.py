"""Observed messages and extraction jobs (schema m004): SQL only, one transaction per call.

A session is (owner, chat, session key).  Its job row carries the high-water mark
``done_seq``: messages with a higher ``seq`` have not been extracted yet.  ``observe`` stores
messages and pushes the job's due time to "now + debounce", so a job comes due only once the
session has been quiet that long.  A claim leases the job (a crash mid-extraction loses
nothing: the lease runs out, or start-up clears it); completing it advances the mark in the
same transaction that stores the facts, so the same messages are never extracted twice.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw
import msgspec

from memoryd.store.db import one
from memoryd.store.jobs import MAX_ERROR_CHARS, backoff_ms

#: A claimed extraction stays invisible to other claims this long (an LLM call with its
#: retries fits well inside; a crash is healed by start-up clearing leases anyway).
LEASE_MS = 15 * 60 * 1000
#: Messages kept per session; older ones are dropped as new ones arrive.
MAX_SESSION_MESSAGES = 2000
#: Rows one retention step removes (one short write transaction each).
PRUNE_BATCH = 5000


@dataclass(frozen=True)
class SessionRef:
    owner: str
    chat_id: str | None
    session_key: str | None

    @property
    def key(self) -> str:
        return msgspec.json.encode([self.owner, self.chat_id, self.session_key]).decode()


@dataclass(frozen=True)
class SessionContext:
    """What observe knows about a session besides its messages (the latest call wins)."""

    chat_type: str | None = None
    timezone: str | None = None
    speaker_username: str | None = None
    speaker_display_name: str | None = None


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    role: str
    content: str
    message_id: str | None
    sent_at: str | float | None
    username: str | None
    display_name: str | None
    user_id: str | None


@dataclass(frozen=True)
class ExtractionJob:
    session: SessionRef
    context: SessionContext
    attempts: int
    #: The messages to extract (seq > the high-water mark), oldest first.
    messages: list[StoredMessage] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq


_MESSAGE_FIELDS = "role, content, message_id, sent_at, username, display_name, author_user_id"
_MESSAGE_COLUMNS = f"seq, {_MESSAGE_FIELDS}"


def _message(row: tuple[Any, ...]) -> StoredMessage:
    seq, role, content, message_id, sent_at, username, display_name, user_id = row
    return StoredMessage(
        seq, role, content, message_id, None if sent_at is None else msgspec.json.decode(sent_at),
        username, display_name, user_id,
    )


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
        f"INSERT INTO observed_messages (session, {_MESSAGE_FIELDS}, received_at_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                key, m.role, m.content, m.message_id,
                None if m.sent_at is None else msgspec.json.encode(m.sent_at).decode(),
                m.username, m.display_name, m.user_id, now_ms,
            )
            for m in messages
        ],
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
                key, session.owner, session.chat_id, session.session_key, context.chat_type,
                context.timezone, context.speaker_username, context.speaker_display_name,
                len(messages), due_at_ms, now_ms,
            ),
        )
    return len(messages)


def session_messages(db: apsw.Connection, session: SessionRef, limit: int) -> list[StoredMessage]:
    """The newest ``limit`` messages of a session, oldest first."""
    rows = db.execute(
        f"SELECT * FROM (SELECT {_MESSAGE_COLUMNS} FROM observed_messages WHERE session = ? "
        "ORDER BY seq DESC LIMIT ?) ORDER BY seq",
        (session.key, limit),
    ).fetchall()
    return [_message(row) for row in rows]


def window(
    db: apsw.Connection, session: SessionRef, message_id: str, radius: int
) -> tuple[SessionRef, list[StoredMessage]] | None:
    """The message ``message_id`` with ``radius`` messages either side, in ``session`` or, when
    its ``session_key`` is None, in the newest session of the same owner and chat that has it."""
    if session.session_key is not None:
        where, bounds = "session = ?", (session.key,)
    else:
        # Keys are JSON [owner, chat, key]: the sessions of one owner and chat are exactly the
        # keys from '["owner","chat",' (inclusive) to '["owner","chat"-' (',' + 1 = '-').
        prefix = msgspec.json.encode([session.owner, session.chat_id]).decode()[:-1] + ","
        where, bounds = "session >= ? AND session < ?", (prefix, prefix[:-1] + "-")
    row = db.execute(
        f"SELECT session, seq FROM observed_messages WHERE message_id = ? AND {where} ORDER BY seq DESC LIMIT 1",
        (message_id, *bounds),
    ).fetchone()
    if row is None:
        return None
    key, seq = row
    before = db.execute(
        f"SELECT {_MESSAGE_COLUMNS} FROM observed_messages WHERE session = ? AND seq <= ? ORDER BY seq DESC LIMIT ?",
        (key, seq, radius + 1),
    ).fetchall()
    after = db.execute(
        f"SELECT {_MESSAGE_COLUMNS} FROM observed_messages WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?",
        (key, seq, radius),
    ).fetchall()
    owner, chat_id, session_key = msgspec.json.decode(key)
    return SessionRef(owner, chat_id, session_key), [_message(r) for r in [*reversed(before), *after]]


def claim(db: apsw.Connection, now_ms: int, limit: int, max_messages: int) -> list[ExtractionJob]:
    """Lease up to ``limit`` due jobs, each with its next ``max_messages`` unextracted messages.

    A due job with nothing new (its messages were pruned) goes idle instead.
    """
    rows = db.execute(
        """
        SELECT session, owner, chat_id, session_key, chat_type, timezone, speaker_username,
            speaker_display_name, done_seq, attempts
        FROM extraction_jobs
        WHERE due_at_ms IS NOT NULL AND due_at_ms <= ? AND parked_at_ms IS NULL
            AND (leased_until_ms IS NULL OR leased_until_ms <= ?)
        ORDER BY due_at_ms LIMIT ?
        """,
        (now_ms, now_ms, limit),
    ).fetchall()
    claimed = []
    for key, owner, chat_id, session_key, chat_type, timezone, username, display, done_seq, attempts in rows:
        messages = [
            _message(row)
            for row in db.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM observed_messages WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?",
                (key, done_seq, max_messages),
            )
        ]
        if not messages:
            db.execute("UPDATE extraction_jobs SET due_at_ms = NULL WHERE session = ?", (key,))
            continue
        db.execute("UPDATE extraction_jobs SET leased_until_ms = ? WHERE session = ?", (now_ms + LEASE_MS, key))
        claimed.append(
            ExtractionJob(
                SessionRef(owner, chat_id, session_key),
                SessionContext(chat_type, timezone, username, display),
                attempts,
                messages,
            )
        )
    return claimed


def advance(db: apsw.Connection, job: ExtractionJob, now_ms: int) -> None:
    """The job's messages are extracted: move the mark past them.  Still due only when newer
    messages wait (observe set their due time; a second chunk of a long backlog is due now)."""
    db.execute(
        """
        UPDATE extraction_jobs SET done_seq = max(done_seq, ?1), attempts = 0, last_error = NULL,
            leased_until_ms = NULL, updated_at_ms = ?2,
            due_at_ms = CASE WHEN EXISTS (SELECT 1 FROM observed_messages WHERE session = ?3 AND seq > ?1)
                THEN coalesce(due_at_ms, ?2) ELSE NULL END
        WHERE session = ?3
        """,
        (job.last_seq, now_ms, job.session.key),
    )


def fail(
    db: apsw.Connection,
    job: ExtractionJob,
    error: str,
    now_ms: int,
    *,
    park: bool,
    retry_after_ms: int = 0,
    rng: random.Random | None = None,
) -> int:
    """Count a failed attempt: retry after a backoff (at least ``retry_after_ms``), or park the
    job with the reason.  Returns the attempts so far."""
    attempts = job.attempts + 1
    due = now_ms + max(backoff_ms(attempts, rng), retry_after_ms)
    db.execute(
        "UPDATE extraction_jobs SET attempts = ?, last_error = ?, leased_until_ms = NULL, updated_at_ms = ?, "
        "due_at_ms = ?, parked_at_ms = ? WHERE session = ?",
        (attempts, error[:MAX_ERROR_CHARS], now_ms, due, now_ms if park else None, job.session.key),
    )
    return attempts


def clear_leases(db: apsw.Connection) -> None:
    """At start-up: nothing can still be extracting for a previous run."""
    db.execute("UPDATE extraction_jobs SET leased_until_ms = NULL WHERE leased_until_ms IS NOT NULL")


def next_due_ms(db: apsw.Connection) -> int | None:
    (due,) = one(
        db,
        "SELECT min(max(due_at_ms, coalesce(leased_until_ms, 0))) FROM extraction_jobs "
        "WHERE due_at_ms IS NOT NULL AND parked_at_ms IS NULL",
    )
    return None if due is None else int(due)


def status(db: apsw.Connection) -> dict[str, Any]:
    """Sessions waiting for extraction, parked ones, the newest error, messages held."""
    pending, parked, failing = one(
        db,
        "SELECT coalesce(sum(parked_at_ms IS NULL), 0), coalesce(sum(parked_at_ms IS NOT NULL), 0), "
        "coalesce(sum(attempts > 0 AND parked_at_ms IS NULL), 0) FROM extraction_jobs WHERE due_at_ms IS NOT NULL",
    )
    row = db.execute(
        "SELECT last_error FROM extraction_jobs WHERE last_error IS NOT NULL ORDER BY updated_at_ms DESC LIMIT 1"
    ).fetchone()
    (held,) = one(db, "SELECT count(*) FROM observed_messages")
    return {
        "pending_sessions": int(pending),
        "failing_sessions": int(failing),
        "parked_sessions": int(parked),
        "last_error": None if row is None else row[0],
        "messages_held": int(held),
    }


def retry_parked(db: apsw.Connection, now_ms: int) -> dict[str, int]:
    """`memoryd jobs retry`: parked extraction jobs and failing embed jobs are due now, afresh."""
    before = db.total_changes()
    db.execute(
        "UPDATE extraction_jobs SET parked_at_ms = NULL, attempts = 0, due_at_ms = ?, leased_until_ms = NULL, "
        "updated_at_ms = ? WHERE parked_at_ms IS NOT NULL",
        (now_ms, now_ms),
    )
    extract = db.total_changes() - before
    before = db.total_changes()
    db.execute("UPDATE jobs SET attempts = 0, due_at_ms = ? WHERE attempts > 0 AND leased_until_ms IS NULL", (now_ms,))
    return {"extract": extract, "embed": db.total_changes() - before}


def prune(db: apsw.Connection, cutoff_ms: int) -> int:
    """One batch of retention: messages received before ``cutoff_ms``; then the jobs of
    sessions left without messages (nothing more can come of them)."""
    before = db.total_changes()
    db.execute(
        "DELETE FROM observed_messages WHERE seq IN (SELECT seq FROM observed_messages "
        "WHERE received_at_ms < ? ORDER BY received_at_ms LIMIT ?)",
        (cutoff_ms, PRUNE_BATCH),
    )
    removed = db.total_changes() - before
    db.execute(
        "DELETE FROM extraction_jobs WHERE leased_until_ms IS NULL AND NOT EXISTS "
        "(SELECT 1 FROM observed_messages AS m WHERE m.session = extraction_jobs.session)"
    )
    return removed
