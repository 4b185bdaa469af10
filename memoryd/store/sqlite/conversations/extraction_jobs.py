"""Extraction jobs (schema m004): one row per session, leased, advanced, failed or parked.

A job row carries the high-water mark ``done_seq``: messages of its session with a higher
``seq`` have not been extracted yet.  A claim leases the job (a crash mid-extraction loses
nothing: the lease runs out, or start-up clears it); completing it advances the mark in the
same transaction that stores the facts, so the same messages are never extracted twice.
"""

from __future__ import annotations

import random
from typing import Any

import apsw

from memoryd.store.conversation_records import (
    JOB_COLUMNS,
    MESSAGE_COLUMNS,
    ExtractionJob,
    job_from_row,
    message_from_row,
)
from memoryd.store.conversation_rules import EXTRACTION_LEASE_MS, extraction_status
from memoryd.store.sqlite.db.database import one, rows_changed
from memoryd.store.sqlite.jobs import lease
from memoryd.store.sqlite.jobs.jobs import MAX_ERROR_CHARS, backoff_ms


def schedule_backlog(db: apsw.Connection, now_ms: int, cutoff_ms: int) -> int:
    """Make due the sessions holding messages never extracted (observed while extraction was
    off), those received since ``cutoff_ms`` only.  Each comes due at its oldest such message's
    arrival, so the worker (which claims by due time) takes the oldest first.  Returns how many."""
    created = rows_changed(
        db,
        """
        INSERT INTO extraction_jobs (session, owner, chat_id, session_key, done_seq, due_at_ms, updated_at_ms)
        SELECT session, json_extract(session, '$[0]'), json_extract(session, '$[1]'), json_extract(session, '$[2]'),
            coalesce((SELECT max(seq) FROM observed_messages AS old WHERE old.session = m.session
                      AND old.received_at_ms < ?2), 0),
            min(received_at_ms), ?1
        FROM observed_messages AS m
        WHERE received_at_ms >= ?2 AND NOT EXISTS (SELECT 1 FROM extraction_jobs AS j WHERE j.session = m.session)
        GROUP BY session
        """,
        (now_ms, cutoff_ms),
    )
    resumed = rows_changed(
        db,
        """
        UPDATE extraction_jobs SET due_at_ms = (
            SELECT min(received_at_ms) FROM observed_messages AS m
            WHERE m.session = extraction_jobs.session AND m.seq > extraction_jobs.done_seq), updated_at_ms = ?1
        WHERE due_at_ms IS NULL AND parked_at_ms IS NULL AND EXISTS (
            SELECT 1 FROM observed_messages AS m
            WHERE m.session = extraction_jobs.session AND m.seq > extraction_jobs.done_seq AND m.received_at_ms >= ?2)
        """,
        (now_ms, cutoff_ms),
    )
    return created + resumed


def claim(db: apsw.Connection, now_ms: int, limit: int, max_messages: int) -> list[ExtractionJob]:
    """Lease up to ``limit`` due jobs, each with its next ``max_messages`` unextracted messages.

    A due job with nothing new (its messages were pruned) goes idle instead.
    """
    rows = db.execute(
        f"""
        SELECT {JOB_COLUMNS}
        FROM extraction_jobs
        WHERE due_at_ms IS NOT NULL AND parked_at_ms IS NULL AND {lease.claimable()}
        ORDER BY due_at_ms LIMIT ?
        """,
        (now_ms, now_ms, limit),
    ).fetchall()
    claimed = []
    for row in rows:
        key, *_, done_seq, _attempts = row
        messages = [
            message_from_row(message)
            for message in db.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM observed_messages WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?",
                (key, done_seq, max_messages),
            )
        ]
        if not messages:
            db.execute("UPDATE extraction_jobs SET due_at_ms = NULL WHERE session = ?", (key,))
            continue
        lease.take(db, "extraction_jobs", "session", [key], now_ms + EXTRACTION_LEASE_MS)
        claimed.append(job_from_row(row, messages))
    return claimed


def advance(db: apsw.Connection, job: ExtractionJob, now_ms: int) -> bool:
    """The job's messages are extracted: move the mark past them.  Still due only when newer
    messages wait (observe set their due time; a second chunk of a long backlog is due now).
    False when the job is gone: its session was erased since the claim.

    A session's job is named by its key, which comes back when the user talks on after an
    erasure; that new job's mark starts at the last message before its own, so at or past
    every erased one (seqs are never reused).  Only a mark still below the claimed messages is
    this claim's job: else the late answer, learned from erased messages, is not stored (a
    second claim that already moved the mark past them stored the same facts)."""
    changed = rows_changed(
        db,
        """
        UPDATE extraction_jobs SET done_seq = max(done_seq, ?1), attempts = 0, last_error = NULL,
            leased_until_ms = NULL, updated_at_ms = ?2,
            due_at_ms = CASE WHEN EXISTS (SELECT 1 FROM observed_messages WHERE session = ?3 AND seq > ?1)
                THEN coalesce(due_at_ms, ?2) ELSE NULL END
        WHERE session = ?3 AND done_seq < ?1
        """,
        (job.last_seq, now_ms, job.session.key),
    )
    return changed > 0


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
    """At start-up: nothing can still be extracting for a previous run, nor asking the LLM about
    a supersession (the LLM's other job: its worker starts after this; the embed jobs' leases
    are the backfill's to clear, once its embedder is up)."""
    lease.release_all(db, "extraction_jobs")
    db.execute("UPDATE jobs SET leased_until_ms = NULL WHERE kind = 'supersede' AND leased_until_ms IS NOT NULL")


def next_due_ms(db: apsw.Connection) -> int | None:
    return lease.next_claimable_ms(db, "extraction_jobs", "due_at_ms IS NOT NULL AND parked_at_ms IS NULL")


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
    return extraction_status(pending, failing, parked, None if row is None else row[0], held)


def retry_parked(db: apsw.Connection, now_ms: int) -> dict[str, int]:
    """`memoryd jobs retry`: parked extraction jobs and failing embed jobs are due now, afresh."""
    extract = rows_changed(
        db,
        "UPDATE extraction_jobs SET parked_at_ms = NULL, attempts = 0, due_at_ms = ?, leased_until_ms = NULL, "
        "updated_at_ms = ? WHERE parked_at_ms IS NOT NULL",
        (now_ms, now_ms),
    )
    embed = rows_changed(
        db, "UPDATE jobs SET attempts = 0, due_at_ms = ? WHERE attempts > 0 AND leased_until_ms IS NULL", (now_ms,)
    )
    return {"extract": extract, "embed": embed}
