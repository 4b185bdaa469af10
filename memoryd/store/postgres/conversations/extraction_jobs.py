"""Extraction jobs on PostgreSQL: one row per session, leased with ``FOR UPDATE SKIP LOCKED``,
advanced (only while this daemon holds the lease), failed or parked."""

from __future__ import annotations

from typing import Any

import psycopg

from memoryd.store.conversation_records import (
    JOB_COLUMNS,
    MESSAGE_COLUMNS,
    ExtractionJob,
    job_from_row,
    message_from_row,
)
from memoryd.store.conversation_rules import EXTRACTION_LEASE_MS, extraction_status
from memoryd.store.postgres import jobs as job_rows

Conn = psycopg.Connection[Any]


def schedule_backlog(conn: Conn, now_ms: int, cutoff_ms: int) -> int:
    """Make due the sessions holding messages never extracted (observed while extraction was
    off), those received since ``cutoff_ms`` only.  Each comes due at its oldest such message's
    arrival, so the worker (which claims by due time) takes the oldest first.  How many."""
    created = conn.execute(
        "INSERT INTO extraction_jobs (session, owner, chat_id, session_key, done_seq, due_at_ms, updated_at_ms) "
        "SELECT session, (session::jsonb)->>0, (session::jsonb)->>1, (session::jsonb)->>2, "
        "coalesce((SELECT max(seq) FROM observed_messages AS old WHERE old.session = m.session "
        "AND old.received_at_ms < %(cutoff)s), 0), min(received_at_ms), %(now)s "
        "FROM observed_messages AS m WHERE received_at_ms >= %(cutoff)s "
        "AND NOT EXISTS (SELECT 1 FROM extraction_jobs AS j WHERE j.session = m.session) GROUP BY session "
        "ON CONFLICT (session) DO NOTHING",
        {"now": now_ms, "cutoff": cutoff_ms},
    ).rowcount
    resumed = conn.execute(
        "UPDATE extraction_jobs AS j SET due_at_ms = (SELECT min(received_at_ms) FROM observed_messages AS m "
        "WHERE m.session = j.session AND m.seq > j.done_seq), updated_at_ms = %(now)s "
        "WHERE due_at_ms IS NULL AND parked_at_ms IS NULL AND EXISTS (SELECT 1 FROM observed_messages AS m "
        "WHERE m.session = j.session AND m.seq > j.done_seq AND m.received_at_ms >= %(cutoff)s)",
        {"now": now_ms, "cutoff": cutoff_ms},
    ).rowcount
    if created or resumed:
        job_rows.notify(conn)
    return int(created) + int(resumed)


def claim(conn: Conn, now_ms: int, limit: int, max_messages: int, owner: str) -> list[ExtractionJob]:
    job_rows.reap(conn, "extraction_jobs", now_ms)
    found = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM extraction_jobs WHERE due_at_ms IS NOT NULL AND due_at_ms <= %s "
        "AND leased_until_ms IS NULL AND parked_at_ms IS NULL ORDER BY due_at_ms LIMIT %s FOR UPDATE SKIP LOCKED",
        (now_ms, limit),
    ).fetchall()
    claimed = []
    for row in found:
        key, *_, done_seq, _attempts = row
        messages = [
            message_from_row(message)
            for message in conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM observed_messages WHERE session = %s AND seq > %s ORDER BY seq LIMIT %s",
                (key, done_seq, max_messages),
            )
        ]
        if not messages:
            conn.execute("UPDATE extraction_jobs SET due_at_ms = NULL WHERE session = %s", (key,))
            continue
        conn.execute(
            "UPDATE extraction_jobs SET leased_until_ms = %s, lease_owner = %s WHERE session = %s",
            (now_ms + EXTRACTION_LEASE_MS, owner, key),
        )
        claimed.append(job_from_row(row, messages))
    return claimed


def advance(conn: Conn, job: ExtractionJob, now_ms: int, owner: str) -> bool:
    """Move the mark past the job's messages, only while this daemon holds the lease and the
    mark is still below them: a session's job erased since the claim and created again (the
    user talked on) has the same key, maybe leased to this daemon too, but its mark starts at
    or past every erased message (seqs come from a sequence), so the late answer is refused."""
    cursor = conn.execute(
        "UPDATE extraction_jobs SET done_seq = greatest(done_seq, %(seq)s), attempts = 0, last_error = NULL, "
        "leased_until_ms = NULL, lease_owner = NULL, updated_at_ms = %(now)s, "
        "due_at_ms = CASE WHEN EXISTS (SELECT 1 FROM observed_messages WHERE session = %(key)s AND seq > %(seq)s) "
        "THEN coalesce(due_at_ms, %(now)s) ELSE NULL END "
        "WHERE session = %(key)s AND lease_owner = %(owner)s AND done_seq < %(seq)s",
        {"seq": job.last_seq, "now": now_ms, "key": job.session.key, "owner": owner},
    )
    return cursor.rowcount == 1


def fail(conn: Conn, job: ExtractionJob, error: str, now_ms: int, park: bool, retry_after_ms: int, owner: str) -> int:
    attempts = job.attempts + 1
    due = now_ms + max(job_rows.backoff_ms(attempts), retry_after_ms)
    conn.execute(
        "UPDATE extraction_jobs SET attempts = %s, last_error = %s, leased_until_ms = NULL, lease_owner = NULL, "
        "updated_at_ms = %s, due_at_ms = %s, parked_at_ms = %s WHERE session = %s AND lease_owner = %s",
        (attempts, error[: job_rows.MAX_ERROR_CHARS], now_ms, due, now_ms if park else None, job.session.key, owner),
    )
    return attempts


def next_due_ms(conn: Conn) -> int | None:
    row = conn.execute(
        "SELECT min(greatest(due_at_ms, coalesce(leased_until_ms, 0))) FROM extraction_jobs "
        "WHERE due_at_ms IS NOT NULL AND parked_at_ms IS NULL"
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def status(conn: Conn) -> dict[str, Any]:
    pending, parked, failing = conn.execute(
        "SELECT count(*) FILTER (WHERE parked_at_ms IS NULL), count(*) FILTER (WHERE parked_at_ms IS NOT NULL), "
        "count(*) FILTER (WHERE attempts > 0 AND parked_at_ms IS NULL) FROM extraction_jobs WHERE due_at_ms IS NOT NULL"
    ).fetchone() or (0, 0, 0)
    row = conn.execute(
        "SELECT last_error FROM extraction_jobs WHERE last_error IS NOT NULL ORDER BY updated_at_ms DESC LIMIT 1"
    ).fetchone()
    (held,) = conn.execute("SELECT count(*) FROM observed_messages").fetchone() or (0,)
    return extraction_status(pending, failing, parked, None if row is None else row[0], held)


def retry_parked(conn: Conn, now_ms: int) -> dict[str, int]:
    extract = conn.execute(
        "UPDATE extraction_jobs SET parked_at_ms = NULL, attempts = 0, due_at_ms = %s, leased_until_ms = NULL, "
        "lease_owner = NULL, updated_at_ms = %s WHERE parked_at_ms IS NOT NULL",
        (now_ms, now_ms),
    ).rowcount
    embed = conn.execute(
        "UPDATE jobs SET attempts = 0, due_at_ms = %s, parked_at_ms = NULL WHERE attempts > 0 AND leased_until_ms IS NULL",
        (now_ms,),
    ).rowcount
    job_rows.notify(conn)
    return {"extract": int(extract), "embed": int(embed)}
