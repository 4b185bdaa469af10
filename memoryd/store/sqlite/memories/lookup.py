"""Memories by id: full ids and unique prefixes among what the caller can see, and short ids.

A prefix resolves among the caller's visible memories only (expired and superseded ones
included: they can still be read by id and deleted), so another user's ids can neither be hit nor make a prefix ambiguous.
The prefix arrives normalised and checked (``memoryd.service.validation``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apsw
import msgspec

from memoryd.errors import AmbiguousIdPrefix
from memoryd.ids import unique_prefix
from memoryd.store.memory_rules import hide_successors, pin_event, replaced_records
from memoryd.store.records import MemoryRecord
from memoryd.store.sqlite.db.database import one
from memoryd.store.sqlite.memories import memories
from memoryd.store.sqlite.vectors import vectors
from memoryd.store.sqlite.visibility_sql import predicate
from memoryd.store.visibility import Scope

_encode = msgspec.json.encode

#: Upper bound for an id range: sorts after every Crockford character.
_AFTER_ALL_ID_CHARS = "~"


def _prefix_range(scope: Scope, prefix: str, now_ms: int) -> tuple[str, tuple[object, ...]]:
    where, params = predicate(scope, now_ms=now_ms, include_expired=True, include_superseded=True)
    return f"{where} AND memories.id >= ? AND memories.id < ?", (*params, prefix, prefix + _AFTER_ALL_ID_CHARS)


def resolve_visible(db: apsw.Connection, scope: Scope, prefix: str, now_ms: int) -> tuple[int, str] | None:
    """(rowid, id) of the one visible memory matching ``prefix`` (a full id or a unique prefix),
    None when none does; AmbiguousIdPrefix when several visible memories match."""
    where, params = _prefix_range(scope, prefix, now_ms)
    matches: list[tuple[Any, ...]] = db.execute(
        f"SELECT rowid, id FROM memories WHERE {where} ORDER BY id LIMIT 2", params
    ).fetchall()
    if not matches:
        return None
    if len(matches) > 1:
        (count,) = one(db, f"SELECT count(*) FROM memories WHERE {where}", params)
        raise AmbiguousIdPrefix(prefix, int(count))
    rowid, memory_id = matches[0]
    return int(rowid), str(memory_id)


def get_visible(db: apsw.Connection, scope: Scope, prefix: str, now_ms: int) -> MemoryRecord | None:
    """The visible, unexpired memory matching ``prefix`` (superseded or not), or None."""
    match = resolve_visible(db, scope, prefix, now_ms)
    if match is None:
        return None
    return memories.fetch_visible(db, scope, [match[0]], now_ms, include_superseded=True).get(match[0])


def delete(db: apsw.Connection, scope: Scope, prefix: str, now_ms: int) -> str | None:
    """Soft-delete the one visible memory matching ``prefix``; its full id, or None."""
    match = resolve_visible(db, scope, prefix, now_ms)
    if match is None:
        return None
    rowid, full_id = match
    memories.mark_deleted(db, rowid, now_ms)
    memories.audit(db, full_id, "deleted", scope.user_id, now_ms, {"chat_id": scope.chat_id})
    return full_id


def pin(db: apsw.Connection, scope: Scope, prefix: str, now_ms: int, *, pinned: bool) -> MemoryRecord | None:
    """Pin (or unpin) the one visible memory matching ``prefix``; its record, or None.

    A pinned memory is kept for good: its expiry is cleared (the audit event keeps the old
    one), eviction passes it over and nothing decays it.  Unpinning leaves it without expiry.
    """
    match = resolve_visible(db, scope, prefix, now_ms)
    if match is None:
        return None
    rowid, full_id = match
    (was_pinned, expires_at_ms) = one(db, "SELECT pinned, expires_at_ms FROM memories WHERE rowid = ?", (rowid,))
    if bool(was_pinned) != pinned:
        if pinned:
            db.execute(
                "UPDATE memories SET pinned = 1, expires_at_ms = NULL, expiry_recorded_ms = NULL WHERE rowid = ?",
                (rowid,),
            )
            space = vectors.read_space(db)
            if space is not None and expires_at_ms is not None:
                vectors.set_expiry(db, space, rowid, None)
        else:
            db.execute("UPDATE memories SET pinned = 0 WHERE rowid = ?", (rowid,))
        event, detail = pin_event(scope, pinned, expires_at_ms)
        memories.audit(db, full_id, event, scope.user_id, now_ms, detail)
    return memories.fetch_visible(db, scope, [rowid], now_ms, include_superseded=True).get(rowid)


def hide_unseen_successors(db: apsw.Connection, scope: Scope, records: Iterable[MemoryRecord]) -> None:
    """``memory_rules.hide_successors`` for the successors ``scope`` may not see (hidden by the
    disclosure rules, another chat's, deleted)."""
    replaced = replaced_records(records)
    if not replaced:
        return
    where, params = predicate(scope, now_ms=0, include_expired=True, include_superseded=True)
    seen = {
        str(memory_id)
        for (memory_id,) in db.execute(
            f"SELECT memories.id FROM json_each(?) AS wanted CROSS JOIN memories ON memories.id = wanted.value "
            f"WHERE {where}",
            (_encode(sorted({record.superseded_by for record in replaced})).decode(), *params),
        )
    }
    hide_successors(replaced, seen)


def short_ids(db: apsw.Connection, scope: Scope, ids: Iterable[str], now_ms: int) -> dict[str, str]:
    """Shortest prefix (>= MIN_PREFIX_LENGTH) of each id that no other visible memory shares.

    Ids sort, so only the two neighbours of an id in the caller's visible set matter.
    """
    result: dict[str, str] = {}
    for memory_id in ids:
        neighbours: list[str | None] = []
        for key in scope.visible_keys():
            where, params = predicate(scope, now_ms=now_ms, include_expired=True, include_superseded=True, key=key)
            (before,) = one(db, f"SELECT max(id) FROM memories WHERE {where} AND id < ?", (*params, memory_id))
            (after,) = one(db, f"SELECT min(id) FROM memories WHERE {where} AND id > ?", (*params, memory_id))
            neighbours += (before, after)
        result[memory_id] = unique_prefix(memory_id, neighbours)
    return result
