"""Memories by id on PostgreSQL: full ids and unique prefixes among what the caller can see
(get, delete, pin), successors the caller may be told of, and short ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from memoryd.errors import AmbiguousIdPrefix
from memoryd.ids import unique_prefix
from memoryd.store.memory_rules import hide_successors, pin_event, replaced_records
from memoryd.store.postgres import notices
from memoryd.store.postgres.memories.memories import RECORD_COLUMNS, audit, mark_deleted, record
from memoryd.store.postgres.visibility import predicate
from memoryd.store.records import MemoryRecord
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]


def _prefix_where(scope: Scope, prefix: str, now_ms: int) -> tuple[str, tuple[object, ...]]:
    where, params = predicate(scope, now_ms=now_ms, include_expired=True, include_superseded=True)
    return f"{where} AND m.id >= %s AND m.id < %s", (*params, prefix, prefix + "~")


def resolve(conn: Conn, scope: Scope, prefix: str, now_ms: int) -> tuple[int, str, str] | None:
    """(rowid, id, scope key) of the one visible memory ``prefix`` names; AmbiguousIdPrefix."""
    where, params = _prefix_where(scope, prefix, now_ms)
    rows = conn.execute(
        f"SELECT m.rowid, m.id, m.scope_key FROM memories AS m WHERE {where} ORDER BY m.id LIMIT 2", params
    ).fetchall()
    if not rows:
        return None
    if len(rows) > 1:
        (count,) = conn.execute(f"SELECT count(*) FROM memories AS m WHERE {where}", params).fetchone() or (2,)
        raise AmbiguousIdPrefix(prefix, int(count))
    return int(rows[0][0]), str(rows[0][1]), str(rows[0][2])


def fetch_visible(
    conn: Conn, scope: Scope, rowids: Sequence[int], now_ms: int, *, include_superseded: bool = False
) -> dict[int, MemoryRecord]:
    if not rowids:
        return {}
    where, params = predicate(scope, now_ms=now_ms, include_superseded=include_superseded)
    rows = conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM memories AS m WHERE m.rowid = ANY(%s) AND {where}", (list(rowids), *params)
    )
    return {int(row[0]): record(row) for row in rows}


def get(conn: Conn, scope: Scope, prefix: str, now_ms: int) -> tuple[int, MemoryRecord] | None:
    match = resolve(conn, scope, prefix, now_ms)
    if match is None:
        return None
    found = fetch_visible(conn, scope, [match[0]], now_ms, include_superseded=True).get(match[0])
    return None if found is None else (match[0], found)


def delete(conn: Conn, scope: Scope, prefix: str, now_ms: int) -> str | None:
    match = resolve(conn, scope, prefix, now_ms)
    if match is None:
        return None
    rowid, full_id, key = match
    mark_deleted(conn, [rowid], now_ms)
    audit(conn, key, full_id, "deleted", scope.user_id, now_ms, {"chat_id": scope.chat_id})
    notices.deleted(conn, key)
    return full_id


def pin(conn: Conn, scope: Scope, prefix: str, now_ms: int, *, pinned: bool) -> MemoryRecord | None:
    """Pin (or unpin) the one visible memory matching ``prefix``; its record, or None.

    A pinned memory is kept for good: its expiry is cleared (the audit event keeps the old
    one), eviction passes it over and nothing decays it.  Unpinning leaves it without expiry.
    """
    match = resolve(conn, scope, prefix, now_ms)
    if match is None:
        return None
    rowid, full_id, key = match
    was_pinned, expires_at_ms = conn.execute(
        "SELECT pinned, expires_at_ms FROM memories WHERE rowid = %s", (rowid,)
    ).fetchone() or (False, None)
    if bool(was_pinned) != pinned:
        if pinned:
            conn.execute(
                "UPDATE memories SET pinned = true, expires_at_ms = NULL, expiry_recorded_ms = NULL WHERE rowid = %s",
                (rowid,),
            )
        else:
            conn.execute("UPDATE memories SET pinned = false WHERE rowid = %s", (rowid,))
        event, detail = pin_event(scope, pinned, expires_at_ms)
        audit(conn, key, full_id, event, scope.user_id, now_ms, detail)
        notices.send(conn, notices.CHANGES, key)
    return fetch_visible(conn, scope, [rowid], now_ms, include_superseded=True).get(rowid)


def hide_unseen_successors(conn: Conn, scope: Scope, records: Iterable[MemoryRecord]) -> None:
    """``memory_rules.hide_successors`` for the successors ``scope`` may not see."""
    replaced = replaced_records(records)
    if not replaced:
        return
    where, params = predicate(scope, now_ms=0, include_expired=True, include_superseded=True)
    seen = {
        str(memory_id)
        for (memory_id,) in conn.execute(
            f"SELECT m.id FROM memories AS m WHERE m.id = ANY(%s) AND {where}",
            (sorted({r.superseded_by for r in replaced if r.superseded_by is not None}), *params),
        )
    }
    hide_successors(replaced, seen)


def short_ids(conn: Conn, scope: Scope, ids: Iterable[str], now_ms: int) -> dict[str, str]:
    result: dict[str, str] = {}
    where, params = predicate(scope, now_ms=now_ms, include_expired=True, include_superseded=True)
    for memory_id in ids:
        before, after = conn.execute(
            f"SELECT (SELECT max(m.id) FROM memories AS m WHERE {where} AND m.id < %s), "
            f"(SELECT min(m.id) FROM memories AS m WHERE {where} AND m.id > %s)",
            (*params, memory_id, *params, memory_id),
        ).fetchone() or (None, None)
        result[memory_id] = unique_prefix(memory_id, (before, after))
    return result
