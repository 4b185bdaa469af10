"""Supersession on PostgreSQL: a newer memory replaces older ones of its scope
(``interfaces.SupersessionStore``), with the SQLite backend's rules: the explicit
``supersedes`` target, the ``key`` upsert, a judge's rulings on attribute candidates, or a
deferred 'supersede' job.  Every add that may supersede takes its scope's advisory lock, so two
daemons superseding one user's facts at once end as one daemon would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from memoryd.errors import SupersedeRefused
from memoryd.ids import MIN_PREFIX_LENGTH
from memoryd.store.postgres import eviction, people
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres.db import Database
from memoryd.store.postgres.search import knn
from memoryd.store.postgres.visibility import live, predicate
from memoryd.store.records import MemoryRecord, NewMemory
from memoryd.store.supersession_records import (
    NOT_VISIBLE,
    Plan,
    Ruling,
    Stored,
    SupersedeJob,
    learned_scope,
    refuse_unreplaceable,
    same_author,
    same_subjects,
)
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]
MAX_CHAIN = 200


def _key_of(conn: Conn, rowid: int) -> str:
    row = conn.execute("SELECT scope_key FROM memories WHERE rowid = %s", (rowid,)).fetchone()
    return "" if row is None else str(row[0])


def add(conn: Conn, scope: Scope, new: NewMemory, plan: Plan, now_ms: int) -> Stored:
    from memoryd.store.postgres.store import lock_scope

    lock_scope(conn, new.scope_key)
    # The reads that do not depend on the insert go with the duplicate check (one round trip
    # in the pipeline): the cap, the owner's people, and (when nothing else is replaced first)
    # the attribute candidates, all older than the new memory since the scope is locked.
    caps = eviction.read_caps(conn)
    known = None if plan.owner_names is None else people.read_people(conn, scope.user_id)
    judged = plan.judge is not None and bool(plan.attributes) and not plan.defer
    attributes = list(dict.fromkeys(plan.attributes))
    candidates = None
    if judged and plan.supersedes is None and plan.key is None:
        candidates = send_candidates(conn, scope, new.scope_key, attributes, plan.max_candidates, now_ms)
    target: tuple[int, str, str] | None = None
    if plan.supersedes:
        target = rows.resolve(conn, scope, plan.supersedes, now_ms)
        if target is None:
            raise SupersedeRefused(NOT_VISIBLE, found=False)
        key, superseded_by = conn.execute(
            "SELECT scope_key, superseded_by FROM memories WHERE rowid = %s", (target[0],)
        ).fetchone() or ("", None)
        refuse_unreplaceable(
            key,
            new.scope_key,
            superseded_by,
            lambda successor: rows.resolve(conn, scope, successor, now_ms) is not None,
        )
    added = rows.add(conn, new, now_ms, seen_by=scope)
    rowid, record, deduplicated, queued = added
    if queued:
        job_rows.notify(conn)
    stored = Stored(record, rowid, deduplicated)
    if plan.key is not None:
        conn.execute("UPDATE memories SET key = %s WHERE rowid = %s AND key IS NULL", (plan.key, rowid))
    if not deduplicated:
        for attribute in plan.attributes:
            conn.execute(
                "INSERT INTO memory_attributes (scope_key, attribute, memory_rowid) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (new.scope_key, attribute, rowid),
            )
    if target is not None and target[0] != rowid:
        _apply(
            conn, stored, target[0], Ruling(True, "replaced on request (supersedes)", "explicit"), scope.user_id, now_ms
        )
    if plan.key is not None:
        visible, params = predicate(scope, now_ms=now_ms)
        holders = conn.execute(
            f"SELECT {rows.RECORD_COLUMNS} FROM memories AS m WHERE m.scope_key = %s AND m.key = %s AND m.rowid <> %s AND {visible}",
            (new.scope_key, plan.key, rowid, *params),
        ).fetchall()
        for row in holders:
            old = rows.record(row)
            if same_subjects(old.subjects, record.subjects) and same_author(old, record):
                _apply(
                    conn,
                    stored,
                    int(row[0]),
                    Ruling(True, f"same key {plan.key!r}: the newer wins", "key"),
                    scope.user_id,
                    now_ms,
                )
    if not deduplicated:
        if plan.defer:
            rows.enqueue(conn, new.scope_key, rows.SUPERSEDE, rowid, now_ms)
            job_rows.notify(conn)
        elif plan.judge is not None and judged:
            if candidates is None:
                candidates = send_candidates(conn, scope, new.scope_key, attributes, plan.max_candidates, now_ms, rowid)
            for old_rowid, old in matching(candidates, record, plan.max_candidates):
                ruling = plan.judge(old, record)
                if ruling.supersedes:
                    _apply(conn, stored, old_rowid, ruling, scope.user_id, now_ms)
    if plan.key is not None:
        stored.record = record = rows.fetch(conn, rowid)
    if plan.owner_names is not None:
        learned = people.learn(
            conn, owner=scope.user_id, memory_rowid=rowid, content=record.content, subjects=record.subjects,
            owner_names=plan.owner_names, now_ms=now_ms, max_people=plan.max_people, strict=True, seen_by=scope,
            people=known,
        )  # fmt: skip
        stored.people_changed, stored.people_count = learned.changed, learned.people
    if not deduplicated:
        eviction.hold_cap(conn, new.scope_key, now_ms, caps)
    if not deduplicated or stored.superseded:
        job_rows.changed(conn, new.scope_key)
    stored.short_id = (
        rows.short_ids(conn, scope, [record.id], now_ms)[record.id] if deduplicated else record.id[:MIN_PREFIX_LENGTH]
    )
    return stored


def _apply(conn: Conn, stored: Stored, old_rowid: int, ruling: Ruling, actor: str, now_ms: int) -> None:
    replaced = mark_superseded(conn, old_rowid, stored.record.id, ruling, actor, now_ms)
    if replaced is not None:
        stored.superseded.append(replaced)


def mark_superseded(
    conn: Conn, old_rowid: int, new_id: str, ruling: Ruling, actor: str | None, now_ms: int
) -> str | None:
    row = conn.execute(
        "UPDATE memories SET superseded_by = %s, superseded_at_ms = %s, supersede_reason = %s, updated_at_ms = %s "
        "WHERE rowid = %s AND superseded_by IS NULL AND deleted_at_ms IS NULL RETURNING id, scope_key",
        (new_id, now_ms, ruling.reason, now_ms, old_rowid),
    ).fetchone()
    if row is None:
        return None
    rows.drop_derived(conn, [old_rowid])
    detail = {"by": new_id, "decided_by": ruling.decided_by, "attribute": ruling.attribute}
    rows.audit(conn, str(row[1]), str(row[0]), "superseded", actor, now_ms, detail)
    return str(row[0])


def attribute_candidates(
    conn: Conn,
    scope: Scope,
    rowid: int,
    record: MemoryRecord,
    limit: int,
    now_ms: int,
    extra: Sequence[int] = (),
    *,
    scope_key: str | None = None,
    attributes: Sequence[str] | None = None,
) -> list[tuple[int, MemoryRecord]]:
    """Older live memories of the same scope key and subjects that set one of the new memory's
    attribute keys (plus ``extra``), newest first; only those ``scope`` may see.  An add passes
    the memory's scope key and attributes it just stored (else they are read): then one query."""
    if scope_key is None:
        scope_key = _key_of(conn, rowid)
    if attributes is None:
        attributes = [
            a
            for (a,) in conn.execute(
                "SELECT attribute FROM memory_attributes WHERE scope_key = %s AND memory_rowid = %s",
                (scope_key, rowid),
            )
        ]
    if not attributes and not extra:
        return []
    return matching(send_candidates(conn, scope, scope_key, attributes, limit, now_ms, rowid, extra), record, limit)


def send_candidates(
    conn: Conn,
    scope: Scope,
    scope_key: str,
    attributes: Sequence[str],
    limit: int,
    now_ms: int,
    before: int | None = None,
    extra: Sequence[int] = (),
) -> psycopg.Cursor[Any]:
    """The query of ``attribute_candidates``, sent (``matching`` reads it): the newest
    4 x ``limit`` memories of ``scope_key`` setting one of ``attributes``, and ``extra``, that
    ``scope`` may see, older than rowid ``before`` (None: every stored one)."""
    visible, params = predicate(scope, now_ms=now_ms)
    bound = 1 << 62 if before is None else before
    return conn.execute(
        f"SELECT {rows.RECORD_COLUMNS} FROM memories AS m WHERE m.scope_key = %s AND m.rowid < %s AND {visible} "
        "AND m.rowid IN (SELECT unnest(%s::bigint[]) UNION ALL (SELECT DISTINCT memory_rowid FROM memory_attributes "
        "WHERE scope_key = %s AND attribute = ANY(%s) AND memory_rowid < %s ORDER BY memory_rowid DESC LIMIT %s))",
        (scope_key, bound, *params, list(extra), scope_key, list(attributes), bound, 4 * limit),
    )


def matching(found: psycopg.Cursor[Any], record: MemoryRecord, limit: int) -> list[tuple[int, MemoryRecord]]:
    """The rows of ``send_candidates`` about ``record``'s subjects, by its author, newest first."""
    older = {int(row[0]): rows.record(row) for row in found}
    chosen = [
        (r, old)
        for r, old in sorted(older.items(), reverse=True)
        if same_subjects(old.subjects, record.subjects) and same_author(old, record)
    ]
    return chosen[:limit]


def history(conn: Conn, scope: Scope, prefix: str, now_ms: int) -> list[MemoryRecord] | None:
    match = rows.resolve(conn, scope, prefix, now_ms)
    if match is None:
        return None
    where, params = predicate(scope, now_ms=now_ms, include_expired=True, include_superseded=True)
    seen: dict[str, MemoryRecord] = {}
    order: dict[str, int] = {}
    frontier = [match[1]]
    while frontier and len(seen) < MAX_CHAIN:
        memory_id = frontier.pop()
        if memory_id in seen:
            continue
        row = conn.execute(
            f"SELECT {rows.RECORD_COLUMNS} FROM memories AS m WHERE m.id = %s AND {where}", (memory_id, *params)
        ).fetchone()
        if row is None:
            continue
        record = seen[memory_id] = rows.record(row)
        order[memory_id] = int(row[0])
        if record.superseded_by is not None:
            frontier.append(record.superseded_by)
        frontier += [str(i) for (i,) in conn.execute("SELECT id FROM memories WHERE superseded_by = %s", (memory_id,))]
    chain = sorted(seen.values(), key=lambda r: (r.created_at, order[r.id]))
    rows.hide_unseen_successors(conn, scope, chain)
    return chain


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
    return [r for r in near if _key_of(conn, r) == scope_key]


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
    held = conn.execute(
        "DELETE FROM jobs WHERE job_id = %s AND kind = %s AND lease_owner = %s RETURNING scope_key",
        (job.job_id, rows.SUPERSEDE, owner),
    ).fetchone()
    if held is None:
        return []
    from memoryd.store.postgres.store import lock_scope

    lock_scope(conn, str(held[0]))
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


class Supersessions:
    """``interfaces.SupersessionStore`` on PostgreSQL."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._db: Database = store.db
        self._clock = store.clock

    async def add(self, scope: Scope, new: NewMemory, plan: Plan) -> Stored:
        stored = await self._db.run(add, scope, new, plan, self._clock(), pipeline=True)
        self._store.write_count += 1
        return stored

    async def history(self, scope: Scope, prefix: str) -> list[MemoryRecord] | None:
        now = self._clock()
        records = await self._db.run(history, scope, prefix, now)
        if records:
            self._store.hits.note((record.id for record in records), now)
        return records

    async def claim_jobs(self, limit: int) -> list[SupersedeJob]:
        return await self._db.run(claim_jobs, limit, self._clock(), self._store.owner)

    async def job_candidates(
        self, job: SupersedeJob, *, similarity: float, limit: int, wait_for_vector: bool
    ) -> tuple[MemoryRecord, list[tuple[int, MemoryRecord]]] | None:
        return await self._db.run(job_candidates, job, similarity, limit, self._clock(), wait_for_vector)

    async def complete_job(self, job: SupersedeJob, rulings: Sequence[tuple[int, Ruling]]) -> list[str]:
        return await self._db.run(complete_job, job, list(rulings), self._clock(), self._store.owner)

    async def fail_job(self, job: SupersedeJob, error: str) -> None:
        await self._db.run(job_rows.fail, [job.job_id], error, self._clock(), self._store.owner)

    async def next_due_ms(self) -> int | None:
        return await self._db.run(job_rows.next_due_ms, rows.SUPERSEDE)
