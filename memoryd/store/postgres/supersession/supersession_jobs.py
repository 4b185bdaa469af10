"""The 'supersede' job on PostgreSQL: an LLM decides after the add was acknowledged.

The add queued the job (``supersession.add``); the worker claims it, reads the candidates (the
attribute ones of ``supersession.attribute_candidates`` plus vector neighbours of the same
scope key), and completes it with its rulings, only while this daemon still holds its lease.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres.search import knn
from memoryd.store.postgres.supersession.supersession import attribute_candidates, key_of, mark_superseded
from memoryd.store.postgres.visibility import live
from memoryd.store.records import MemoryRecord
from memoryd.store.supersession_records import Ruling, SupersedeJob, learned_scope
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]


def claim_jobs(conn: Conn, limit: int, now_ms: int, owner: str) -> list[SupersedeJob]:
    claimed = job_rows.claim(conn, rows.SUPERSEDE, limit, now_ms, owner)
    if not claimed:
        return []
    states = {
        int(r): (d, s)
        for r, d, s in conn.execute(
            "SELECT rowid, deleted_at_ms, superseded_by FROM memories WHERE rowid = ANY(%s)",
            ([row[2] for row in claimed],),
        )
    }
    result, gone = [], []
    for _key, job_id, rowid, attempts in claimed:
        state = states.get(int(rowid))
        if state is None or state[0] is not None or state[1] is not None:
            gone.append(int(job_id))
            continue
        result.append(SupersedeJob(int(job_id), int(rowid), int(attempts)))
    if gone:
        conn.execute("DELETE FROM jobs WHERE job_id = ANY(%s)", (gone,))
    return result


def vector_neighbours(conn: Conn, rowid: int, similarity: float, depth: int, now_ms: int) -> list[int] | None:
    generation = rows.vector_generation(conn)
    if generation is None:
        return []
    row = conn.execute(
        "SELECT embedding FROM memory_vectors WHERE rowid = %s AND generation = %s", (rowid, generation)
    ).fetchone()
    if row is None:
        pending = conn.execute(
            "SELECT 1 FROM jobs WHERE memory_rowid = %s AND kind = %s", (rowid, rows.EMBED)
        ).fetchone()
        return None if pending is not None else []
    query = np.asarray(row[0].to_numpy() if hasattr(row[0], "to_numpy") else row[0], dtype=np.float32)
    owner, chat_id, shared, scope_key = conn.execute(
        "SELECT owner, chat_id, shared, scope_key FROM memories WHERE rowid = %s", (rowid,)
    ).fetchone() or ("", None, False, "")
    scope = Scope(owner, chat_id if shared else None)
    nearest = knn(conn, scope, query, generation, max(depth + 1, 64), now_ms)[: depth + 1]
    near = [r for r, cosine in nearest if r != rowid and cosine >= similarity]
    return [r for r in near if key_of(conn, r) == scope_key]


def job_candidates(
    conn: Conn, job: SupersedeJob, similarity: float, limit: int, now_ms: int, wait_for_vector: bool
) -> tuple[MemoryRecord, list[tuple[int, MemoryRecord]]] | None:
    """The job's memory and its candidates; None while its vector is still to come (unless
    ``wait_for_vector`` is False), and None once the memory is gone (erased since the claim)."""
    found = conn.execute(f"SELECT {rows.RECORD_COLUMNS} FROM memories AS m WHERE m.rowid = %s", (job.memory_rowid,))
    row = found.fetchone()
    if row is None:
        return None
    record = rows.record(row)
    near = vector_neighbours(conn, job.memory_rowid, similarity, limit, now_ms)
    if near is None:
        if wait_for_vector:
            return None
        near = []
    return record, attribute_candidates(
        conn, learned_scope(record), job.memory_rowid, record, limit, now_ms, extra=near
    )


def complete_job(
    conn: Conn, job: SupersedeJob, rulings: Sequence[tuple[int, Ruling]], now_ms: int, owner: str
) -> list[str]:
    """Apply the rulings and finish the job, only while this daemon still holds its lease."""
    from memoryd.store.postgres.store import lock_scope

    # The scope's lock first, before the job's row: an eviction, delete or erasure of the scope
    # takes that lock, then deletes the memory's jobs; holding the row while waiting for the
    # lock would deadlock with it.  The key is read unlocked (a job's scope never changes).
    key = conn.execute(
        "SELECT scope_key FROM jobs WHERE job_id = %s AND kind = %s AND lease_owner = %s",
        (job.job_id, rows.SUPERSEDE, owner),
    ).fetchone()
    if key is None:
        return []
    lock_scope(conn, str(key[0]))
    held = conn.execute(
        "DELETE FROM jobs WHERE job_id = %s AND kind = %s AND lease_owner = %s RETURNING job_id",
        (job.job_id, rows.SUPERSEDE, owner),
    ).fetchone()
    if held is None:
        return []
    live_sql, live_params = live(now_ms=now_ms)
    row = conn.execute(
        f"SELECT m.id, m.owner FROM memories AS m WHERE m.rowid = %s AND {live_sql}", (job.memory_rowid, *live_params)
    ).fetchone()
    if row is None:
        return []
    new_id, memory_owner = row
    replaced = [
        mark_superseded(conn, old, new_id, ruling, memory_owner, now_ms) for old, ruling in rulings if ruling.supersedes
    ]
    return [memory_id for memory_id in replaced if memory_id is not None]
