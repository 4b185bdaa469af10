"""The 'supersede' job in SQL: an LLM decides after the add was acknowledged.

The add queued the job in its own transaction (``supersession.add``); the worker
(``service/supersession_worker.py``) claims it, reads the candidates (the attribute ones of
``supersession.attribute_candidates`` plus vector neighbours of the same scope key), and
completes it with its rulings in one transaction that re-checks the memory is still live.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from memoryd.store.records import MemoryRecord
from memoryd.store.sqlite.db.database import one
from memoryd.store.sqlite.jobs import jobs, lease
from memoryd.store.sqlite.supersession.supersession import (
    Ruling,
    attribute_candidates,
    mark_superseded,
    record_of,
    scope_key_of,
)
from memoryd.store.sqlite.vectors import vector_codec, vector_search, vectors
from memoryd.store.sqlite.visibility_sql import live
from memoryd.store.supersession_records import SupersedeJob, learned_scope
from memoryd.store.visibility import Scope


def vector_neighbours(db: apsw.Connection, rowid: int, similarity: float, depth: int, now_ms: int) -> list[int] | None:
    """Rowids of the same scope key whose vectors have cosine >= ``similarity`` with the
    memory's own; None while its vector is still to come (an embed job is pending)."""
    space = vectors.read_space(db)
    if space is None:
        return []
    row = db.execute("SELECT fine FROM vector_copies WHERE memory_rowid = ?", (rowid,)).fetchone()
    if row is None:
        pending = db.execute("SELECT 1 FROM jobs WHERE memory_rowid = ? AND kind = ?", (rowid, jobs.EMBED)).fetchone()
        return None if pending is not None else []
    query = vector_codec.unit_from_fine(row[0], space.dim)
    owner, chat_id, shared, scope_key = one(
        db, "SELECT owner, chat_id, shared, scope_key FROM memories WHERE rowid = ?", (rowid,)
    )
    scope = Scope(owner, chat_id if shared else None)
    nearest = vector_search.knn(db, space, scope, query, depth=depth + 1, coarse_k=max(64, 3 * depth), now_ms=now_ms)
    near = [r for r, cosine in nearest if r != rowid and cosine >= similarity]
    return [r for r in near if scope_key_of(db, r) == scope_key]


def claim_jobs(db: apsw.Connection, limit: int, now_ms: int) -> list[SupersedeJob]:
    """Lease due 'supersede' jobs; jobs of memories no longer live are dropped."""
    rows: list[tuple[Any, ...]] = db.execute(
        "SELECT j.job_id, j.memory_rowid, j.attempts, m.deleted_at_ms, m.superseded_by FROM jobs AS j "
        f"JOIN memories AS m ON m.rowid = j.memory_rowid WHERE j.kind = ? AND {lease.claimable('j')} "
        "ORDER BY j.due_at_ms, j.job_id LIMIT ?",
        (jobs.SUPERSEDE, now_ms, now_ms, limit),
    ).fetchall()
    claimed = []
    for job_id, rowid, attempts, deleted_at, superseded_by in rows:
        if deleted_at is not None or superseded_by is not None:
            db.execute("DELETE FROM jobs WHERE job_id = ?", (job_id,))
            continue
        lease.take(db, "jobs", "job_id", [job_id], now_ms + jobs.LEASE_MS)
        claimed.append(SupersedeJob(int(job_id), int(rowid), int(attempts)))
    return claimed


def job_candidates(
    db: apsw.Connection, job: SupersedeJob, similarity: float, limit: int, now_ms: int, *, wait_for_vector: bool
) -> tuple[MemoryRecord, list[tuple[int, MemoryRecord]]] | None:
    """The job's memory and its candidates; None while its vector is still to come (unless
    ``wait_for_vector`` is False: then the attribute candidates alone), and None once the
    memory is gone (erased since the claim, its job with it: nothing left to decide)."""
    if db.execute("SELECT 1 FROM memories WHERE rowid = ?", (job.memory_rowid,)).fetchone() is None:
        return None
    near = vector_neighbours(db, job.memory_rowid, similarity, limit, now_ms)
    if near is None:
        if wait_for_vector:
            return None
        near = []
    record = record_of(db, job.memory_rowid)
    scope = learned_scope(record)
    return record, attribute_candidates(db, scope, job.memory_rowid, record, limit, now_ms, extra=near)


def complete_job(
    db: apsw.Connection, job: SupersedeJob, rulings: Sequence[tuple[int, Ruling]], now_ms: int
) -> list[str]:
    """Apply the job's rulings (if its memory is still live) and delete the job; ids replaced."""
    db.execute(f"DELETE FROM jobs WHERE {jobs.SAME_JOB}", (job.job_id, jobs.SUPERSEDE, job.memory_rowid))
    live_sql, live_params = live(now_ms=now_ms)
    row = db.execute(
        f"SELECT memories.id, memories.owner FROM memories WHERE memories.rowid = ? AND {live_sql}",
        (job.memory_rowid, *live_params),
    ).fetchone()
    if row is None:
        return []
    new_id, owner = row
    replaced = [mark_superseded(db, old, new_id, ruling, owner, now_ms) for old, ruling in rulings if ruling.supersedes]
    return [memory_id for memory_id in replaced if memory_id is not None]
