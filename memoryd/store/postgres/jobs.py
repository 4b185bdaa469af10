"""Durable background work shared by every daemon on the database: embed and supersede jobs.

A claim takes queued jobs with ``FOR UPDATE SKIP LOCKED`` (two daemons never take one job, and
never wait on each other), leases them to this daemon (``lease_owner``) and returns them; a
lease that ran out is reaped separately, back to queued (an OR of both conditions defeats the
partial indexes).  Completion is fenced on the lease owner in the same transaction as the job's
effects: a daemon whose lease ran out and was taken over writes nothing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from memoryd.errors import EmbeddingModelMismatch
from memoryd.store.postgres import notices
from memoryd.store.postgres.memories import EMBED, SUPERSEDE, vector_generation
from memoryd.store.records import EmbedJob

Conn = psycopg.Connection[Any]

KINDS = (EMBED, SUPERSEDE)
LEASE_MS = 10 * 60 * 1000
FIRST_BACKOFF_MS = 2_000
MAX_BACKOFF_MS = 10 * 60 * 1000
MAX_ERROR_CHARS = 500
#: The channel that wakes idle workers of every daemon when work is queued.
CHANNEL = notices.WORK


def backoff_ms(attempts: int, rng: random.Random | None = None) -> int:
    """Exponential with "equal jitter" (half fixed, half random), as the SQLite queue's."""
    ceiling: int = min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS << min(max(attempts - 1, 0), 30))
    half = ceiling // 2
    return half + (rng or random).randint(0, ceiling - half)


def reap(conn: Conn, table: str, now_ms: int, where: str = "true", params: tuple[object, ...] = ()) -> int:
    """Leases that ran out go back to queued (their holder died or stalled)."""
    cursor = conn.execute(
        f"UPDATE {table} SET leased_until_ms = NULL, lease_owner = NULL WHERE leased_until_ms <= %s AND {where}",
        (now_ms, *params),
    )
    return cursor.rowcount


def claim(conn: Conn, kind: str, limit: int, now_ms: int, owner: str) -> list[tuple[Any, ...]]:
    """Lease up to ``limit`` due jobs of ``kind``: (scope_key, job_id, memory_rowid, attempts), oldest first."""
    reap(conn, "jobs", now_ms, "kind = %s", (kind,))
    rows = conn.execute(
        "WITH due AS (SELECT scope_key, job_id FROM jobs WHERE kind = %s AND leased_until_ms IS NULL "
        "AND parked_at_ms IS NULL AND due_at_ms <= %s ORDER BY due_at_ms, job_id LIMIT %s FOR UPDATE SKIP LOCKED) "
        "UPDATE jobs AS j SET leased_until_ms = %s, lease_owner = %s FROM due "
        "WHERE j.scope_key = due.scope_key AND j.job_id = due.job_id "
        "RETURNING j.scope_key, j.job_id, j.memory_rowid, j.attempts, j.due_at_ms",
        (kind, now_ms, limit, now_ms + LEASE_MS, owner),
    ).fetchall()
    rows.sort(key=lambda row: (row[4], row[1]))
    return [tuple(row[:4]) for row in rows]


def claim_embed(conn: Conn, limit: int, now_ms: int, owner: str) -> list[EmbedJob]:
    generation = vector_generation(conn)
    if generation is None or limit < 1:
        return []
    claimed = claim(conn, EMBED, limit, now_ms, owner)
    if not claimed:
        return []
    memories = {
        int(rowid): (memory_id, content, deleted, expires)
        for rowid, memory_id, content, deleted, expires in conn.execute(
            "SELECT rowid, id, content, deleted_at_ms, expires_at_ms FROM memories WHERE rowid = ANY(%s)",
            ([row[2] for row in claimed],),
        )
    }
    jobs: list[EmbedJob] = []
    gone: list[int] = []
    for _key, job_id, rowid, attempts in claimed:
        memory = memories.get(int(rowid))
        if memory is None or memory[2] is not None or (memory[3] is not None and memory[3] <= now_ms):
            gone.append(int(job_id))
            continue
        jobs.append(EmbedJob(int(job_id), int(rowid), memory[0], memory[1], int(attempts), generation))
    if gone:
        conn.execute("DELETE FROM jobs WHERE job_id = ANY(%s)", (gone,))
    return jobs


def normalized(vector: npt.ArrayLike, dim: int) -> npt.NDArray[np.float32] | None:
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.size != dim:
        raise EmbeddingModelMismatch(f"a vector of {array.size} dimensions for a vector space of {dim}")
    norm = float(np.linalg.norm(array))
    if not np.isfinite(norm) or norm == 0.0:
        return None
    return array / norm


def complete_embed(conn: Conn, results: Sequence[tuple[EmbedJob, npt.ArrayLike]], dim: int, owner: str) -> int:
    generation = vector_generation(conn)
    if generation is None:
        return 0
    written = 0
    for job, vector in results:
        if job.generation != generation:
            continue
        unit = normalized(vector, dim)
        row = conn.execute(
            "DELETE FROM jobs AS j USING memories AS m WHERE j.job_id = %s AND j.kind = %s AND j.lease_owner = %s "
            "AND m.scope_key = j.scope_key AND m.rowid = j.memory_rowid RETURNING m.scope_key, m.deleted_at_ms",
            (job.job_id, EMBED, owner),
        ).fetchone()
        if row is None or row[1] is not None or unit is None:
            continue
        conn.execute(
            "INSERT INTO memory_vectors (scope_key, rowid, generation, embedding) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (scope_key, rowid) DO UPDATE SET generation = excluded.generation, embedding = excluded.embedding",
            (row[0], job.memory_rowid, generation, unit),
        )
        written += 1
    return written


def release(conn: Conn, job_ids: Sequence[int], owner: str) -> None:
    conn.execute(
        "UPDATE jobs SET leased_until_ms = NULL, lease_owner = NULL WHERE job_id = ANY(%s) AND lease_owner = %s",
        (list(job_ids), owner),
    )


def fail(conn: Conn, job_ids: Sequence[int], error: str, now_ms: int, owner: str) -> None:
    """Release for a retry after a growing, jittered delay (only jobs this daemon still holds)."""
    for job_id in job_ids:
        row = conn.execute(
            "SELECT attempts FROM jobs WHERE job_id = %s AND lease_owner = %s FOR UPDATE", (job_id, owner)
        ).fetchone()
        if row is None:
            continue
        attempts = int(row[0]) + 1
        conn.execute(
            "UPDATE jobs SET attempts = %s, due_at_ms = %s, leased_until_ms = NULL, lease_owner = NULL, last_error = %s "
            "WHERE job_id = %s",
            (attempts, now_ms + backoff_ms(attempts), error[:MAX_ERROR_CHARS], job_id),
        )


def next_due_ms(conn: Conn, kind: str) -> int | None:
    row = conn.execute(
        "SELECT min(greatest(due_at_ms, coalesce(leased_until_ms, 0))) FROM jobs WHERE kind = %s AND parked_at_ms IS NULL",
        (kind,),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def backlog(conn: Conn) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for kind, count in conn.execute("SELECT kind, count(*) FROM jobs GROUP BY kind"):
        counts[kind] = int(count)
    return counts


def enqueue_missing(conn: Conn, now_ms: int, *, reset: bool = False) -> int:
    """Queue an embed job for every live memory without a vector of the current generation."""
    generation = vector_generation(conn)
    if generation is None:
        return 0
    reset_count = 0
    if reset:
        reset_count = conn.execute(
            "UPDATE jobs SET due_at_ms = %s, attempts = 0, leased_until_ms = NULL, lease_owner = NULL, last_error = NULL "
            "WHERE kind = %s",
            (now_ms, EMBED),
        ).rowcount
    added = conn.execute(
        "INSERT INTO jobs (scope_key, kind, memory_rowid, due_at_ms, created_at_ms) "
        "SELECT m.scope_key, %s, m.rowid, %s, %s FROM memories AS m WHERE m.deleted_at_ms IS NULL "
        "AND m.superseded_by IS NULL AND (m.expires_at_ms IS NULL OR m.expires_at_ms > %s) "
        "AND NOT EXISTS (SELECT 1 FROM memory_vectors AS v WHERE v.scope_key = m.scope_key AND v.rowid = m.rowid "
        "AND v.generation = %s) ON CONFLICT (scope_key, kind, memory_rowid) DO NOTHING",
        (EMBED, now_ms, now_ms, now_ms, generation),
    ).rowcount
    if added or reset_count:
        notify(conn)
    return int(added) + int(reset_count)


CHANGES = notices.CHANGES


def changed(conn: Conn, key: str) -> None:
    """Tell the other daemons ``key`` changed (once this transaction commits: ``notices``)."""
    notices.send(conn, CHANGES, key)


def notify(conn: Conn, *, changed: str | None = None) -> None:
    """Wake idle workers of every daemon (once this transaction commits: ``notices``); with
    ``changed``, also tell them that scope key changed."""
    notices.send(conn, CHANNEL)
    if changed is not None:
        notices.send(conn, CHANGES, changed)
