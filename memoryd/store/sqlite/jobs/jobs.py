"""Durable background jobs (today: 'embed', one per memory without a current vector).

A job is claimed with a lease rather than deleted, so a crash mid-embedding loses nothing:
the lease runs out (or start-up clears it) and the job is claimed again.  Failures back off
exponentially with jitter, capped at ``MAX_BACKOFF_MS``; a job is retried until it succeeds or
its memory is deleted.

A job id is the table's rowid, which SQLite hands out again once the job holding it is gone
(the highest id plus one; 1 in an empty table).  So a claimed job is found again by its id
*and* its kind and memory (``SAME_JOB``): a worker finishing late (the add's own embedding and
the backfill both had the job, or a claim outlived its lease) must not complete, release or
fail the job another memory was given under the same id since.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol

import apsw
import numpy.typing as npt

from memoryd.store.records import EmbedJob
from memoryd.store.sqlite.jobs import lease
from memoryd.store.sqlite.vectors import vectors
from memoryd.store.sqlite.visibility_sql import live

EMBED = "embed"
#: A memory whose supersession an LLM decides after the add was acknowledged (supersession.py).
SUPERSEDE = "supersede"
KINDS = (EMBED, SUPERSEDE)

#: A claimed job's row: its id, kind and memory (ids are reused, see the module doc).
SAME_JOB = "job_id = ? AND kind = ? AND memory_rowid = ?"

#: How long a claimed job stays invisible to other claims.
LEASE_MS = 10 * 60 * 1000
FIRST_BACKOFF_MS = 2_000
MAX_BACKOFF_MS = 10 * 60 * 1000
MAX_ERROR_CHARS = 500


def backoff_ms(attempts: int, rng: random.Random | None = None) -> int:
    """Delay before retry number ``attempts`` (1 = first retry): exponential, "equal jitter"
    (half fixed, half random) so a burst of failures does not retry in lock-step."""
    ceiling: int = min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS << min(max(attempts - 1, 0), 30))
    half = ceiling // 2
    jitter: int = (rng or random).randint(0, ceiling - half)
    return half + jitter


#: How long the job of an add that embeds its own text stays away from the backfill: the add
#: waits ``embed.add_wait`` at most, then hands the job back (``release``).  Should the daemon
#: die first, start-up clears every lease, so the job is never lost.
OWN_LEASE_MS = 60_000


def enqueue_embed(db: apsw.Connection, memory_rowid: int, now_ms: int) -> None:
    enqueue(db, EMBED, memory_rowid, now_ms)


def enqueue(
    db: apsw.Connection, kind: str, memory_rowid: int, now_ms: int, *, leased_until_ms: int | None = None
) -> int | None:
    """Queue a job (``leased_until_ms``: already leased to the caller until then); its job_id,
    or None when one of that kind was queued for the memory already."""
    row = db.execute(
        "INSERT INTO jobs (kind, memory_rowid, due_at_ms, created_at_ms, leased_until_ms) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (kind, memory_rowid) DO NOTHING RETURNING job_id",
        (kind, memory_rowid, now_ms, now_ms, leased_until_ms),
    ).fetchone()
    return None if row is None else int(row[0])


def enqueue_missing(db: apsw.Connection, space: vectors.VectorSpace, now_ms: int, *, reset: bool = False) -> int:
    """Queue an embed job for every live memory without a vector in ``space``.

    ``reset`` (a new generation) also makes already queued jobs due now with a clean slate.
    Returns how many jobs were added (or reset).
    """
    before: int = db.total_changes()
    if reset:
        db.execute(
            "UPDATE jobs SET due_at_ms = ?, attempts = 0, leased_until_ms = NULL, last_error = NULL WHERE kind = ?",
            (now_ms, EMBED),
        )
    live_sql, live_params = live(now_ms=now_ms)
    db.execute(
        f"""
        INSERT INTO jobs (kind, memory_rowid, due_at_ms, created_at_ms)
        SELECT ?, rowid, ?, ? FROM memories
        WHERE {live_sql} AND (vector_gen IS NULL OR vector_gen != ?)
        ON CONFLICT (kind, memory_rowid) DO NOTHING
        """,
        (EMBED, now_ms, now_ms, *live_params, space.generation),
    )
    after: int = db.total_changes()
    return after - before


def release(db: apsw.Connection, claimed: Sequence[ClaimedJob]) -> None:
    """Hand leased embed jobs back, due now (an add that did not embed its own text in time)."""
    db.executemany(
        f"UPDATE jobs SET leased_until_ms = NULL WHERE {SAME_JOB}",
        [(job.job_id, EMBED, job.memory_rowid) for job in claimed],
    )


def clear_leases(db: apsw.Connection) -> None:
    """At start-up: nothing can still be working on a job claimed by a previous run."""
    lease.release_all(db, "jobs")


def drop_jobs_of(db: apsw.Connection, memory_rowids: Sequence[int]) -> None:
    db.executemany("DELETE FROM jobs WHERE memory_rowid = ?", [(rowid,) for rowid in memory_rowids])


def claim_embed(db: apsw.Connection, limit: int, now_ms: int) -> list[EmbedJob]:
    """Lease up to ``limit`` due embed jobs, oldest first; jobs of gone memories are dropped."""
    space = vectors.read_space(db)
    if space is None or limit < 1:
        return []
    rows: list[tuple[Any, ...]] = db.execute(
        f"""
        SELECT j.job_id, j.memory_rowid, m.id, m.content, j.attempts, m.deleted_at_ms, m.expires_at_ms
        FROM jobs AS j JOIN memories AS m ON m.rowid = j.memory_rowid
        WHERE j.kind = ? AND {lease.claimable("j")}
        ORDER BY j.due_at_ms, j.job_id
        LIMIT ?
        """,
        (EMBED, now_ms, now_ms, limit),
    ).fetchall()
    claimed: list[EmbedJob] = []
    for job_id, rowid, memory_id, content, attempts, deleted_at, expires_at in rows:
        if deleted_at is not None or (expires_at is not None and expires_at <= now_ms):
            db.execute("DELETE FROM jobs WHERE job_id = ?", (job_id,))
            continue
        lease.take(db, "jobs", "job_id", [job_id], now_ms + LEASE_MS)
        claimed.append(EmbedJob(job_id, rowid, memory_id, content, attempts, space.generation))
    return claimed


def complete_embed(db: apsw.Connection, results: Sequence[tuple[EmbedJob, npt.ArrayLike]], now_ms: int) -> int:
    """Store the vectors of finished jobs and delete the jobs; returns vectors written.

    A result is dropped when its job is gone (memory deleted meanwhile) or was claimed for an
    older generation (its job has been re-queued for the current one).
    """
    space = vectors.read_space(db)
    if space is None:
        return 0
    written = 0
    for job, vector in results:
        if job.generation != space.generation:
            continue
        same_job = (job.job_id, EMBED, job.memory_rowid)
        if not db.execute(f"DELETE FROM jobs WHERE {SAME_JOB} RETURNING job_id", same_job).fetchall():
            continue  # completed already (by the add or the backfill, whichever came first)
        row = db.execute(
            "SELECT scope_key, expires_at_ms, disclosure, chat_id, deleted_at_ms FROM memories WHERE rowid = ?",
            (job.memory_rowid,),
        ).fetchone()
        if row is None:
            continue
        scope_key, expires_at_ms, disclosure, chat_id, deleted_at_ms = row
        unit = vectors.normalized(vector, space.dim)
        if deleted_at_ms is not None or unit is None:
            continue
        metadata = vectors.VectorRow(job.memory_rowid, scope_key, expires_at_ms, disclosure, chat_id)
        written += vectors.write_vectors(db, space, [(metadata, unit)])
        db.execute("UPDATE memories SET vector_gen = ? WHERE rowid = ?", (space.generation, job.memory_rowid))
    return written


class ClaimedJob(Protocol):
    """Any claimed job (an ``EmbedJob``, a ``SupersedeJob``): its id and memory name its row."""

    @property
    def job_id(self) -> int: ...

    @property
    def memory_rowid(self) -> int: ...


def fail(
    db: apsw.Connection,
    jobs: Sequence[ClaimedJob],
    error: str,
    now_ms: int,
    rng: random.Random | None = None,
    *,
    kind: str = EMBED,
) -> None:
    """Release ``kind`` jobs for a retry after a growing, jittered delay."""
    for job in jobs:
        same_job = (job.job_id, kind, job.memory_rowid)
        row = db.execute(f"SELECT attempts FROM jobs WHERE {SAME_JOB}", same_job).fetchone()
        if row is None:
            continue
        attempts = row[0] + 1
        db.execute(
            f"UPDATE jobs SET attempts = ?, due_at_ms = ?, leased_until_ms = NULL, last_error = ? WHERE {SAME_JOB}",
            (attempts, now_ms + backoff_ms(attempts, rng), error[:MAX_ERROR_CHARS], *same_job),
        )


def next_due_ms(db: apsw.Connection, kind: str) -> int | None:
    return lease.next_claimable_ms(db, "jobs", "kind = ?", (kind,))


def backlog(db: apsw.Connection) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for kind, count in db.execute("SELECT kind, count(*) FROM jobs GROUP BY kind"):
        counts[kind] = count
    return counts
