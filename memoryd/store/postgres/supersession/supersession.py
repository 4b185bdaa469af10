"""Supersession on PostgreSQL: a newer memory replaces older ones of its scope, with the SQLite
backend's rules: the explicit ``supersedes`` target, the ``key`` upsert, a judge's rulings on
attribute candidates, or a deferred 'supersede' job (``supersession_jobs.py``).  Every add that
may supersede takes its scope's advisory lock, so two daemons superseding one user's facts at
once end as one daemon would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from memoryd.errors import SupersedeRefused
from memoryd.ids import MIN_PREFIX_LENGTH
from memoryd.store.postgres import eviction, people
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres.visibility import predicate
from memoryd.store.records import MemoryRecord, NewMemory
from memoryd.store.supersession_records import (
    NOT_VISIBLE,
    Plan,
    Ruling,
    Stored,
    attribute_candidate,
    may_replace,
    refuse_unreplaceable,
    superseded_detail,
    version_chain,
)
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]


def key_of(conn: Conn, rowid: int) -> str:
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
            if may_replace(old, record):
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
    rows.audit(conn, str(row[1]), str(row[0]), "superseded", actor, now_ms, superseded_detail(new_id, ruling))
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
        scope_key = key_of(conn, rowid)
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
    chosen = [(r, old) for r, old in sorted(older.items(), reverse=True) if attribute_candidate(old, record)]
    return chosen[:limit]


def history(conn: Conn, scope: Scope, prefix: str, now_ms: int) -> list[MemoryRecord] | None:
    match = rows.resolve(conn, scope, prefix, now_ms)
    if match is None:
        return None
    where, params = predicate(scope, now_ms=now_ms, include_expired=True, include_superseded=True)

    def read(memory_id: str) -> tuple[int, MemoryRecord] | None:
        row = conn.execute(
            f"SELECT {rows.RECORD_COLUMNS} FROM memories AS m WHERE m.id = %s AND {where}", (memory_id, *params)
        ).fetchone()
        return None if row is None else (int(row[0]), rows.record(row))

    def replaced_by(memory_id: str) -> list[str]:
        return [str(i) for (i,) in conn.execute("SELECT id FROM memories WHERE superseded_by = %s", (memory_id,))]

    chain = version_chain(match[1], read, replaced_by)
    rows.hide_unseen_successors(conn, scope, chain)
    return chain
