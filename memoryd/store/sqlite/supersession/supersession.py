"""Supersession in SQL: a newer memory replaces older ones of the same scope.

The store does not know *why* a memory replaces another: the service hands it a ``Judge``
(the offline rules, run inline in the add's write transaction) or asks for a 'supersede' job
(an LLM decides later, see ``service/supersession_worker.py``).  The store owns the rest:

- candidates: live memories of the new one's scope key that set one of its attribute keys
  (``memory_attributes``), or whose vectors are near it, with the same subjects;
- the explicit ``supersedes`` target (visible to the caller, same scope) and the ``key`` upsert;
- marking: ``superseded_by``, the time, the reason, an audit event; the old memory's vector and
  jobs go (FTS keeps it: ``include_superseded`` still finds it by keywords), so the vec0 scan is
  never crowded by outdated memories;
- ``history``: the chain around a memory, every link checked by ``visibility.predicate``.

The 'supersede' job's queries are in ``supersession_jobs.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from memoryd.errors import SupersedeRefused
from memoryd.ids import MIN_PREFIX_LENGTH
from memoryd.store.records import RECORD_COLUMNS, MemoryRecord, NewMemory, record_from_row
from memoryd.store.sqlite.admin import eviction
from memoryd.store.sqlite.db.database import one
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.memories import lookup, memories
from memoryd.store.sqlite.people import people_learning
from memoryd.store.sqlite.visibility_sql import predicate
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


def _rowid_of(db: apsw.Connection, memory_id: str) -> int:
    (rowid,) = one(db, "SELECT rowid FROM memories WHERE id = ?", (memory_id,))
    return int(rowid)


def record_of(db: apsw.Connection, rowid: int) -> MemoryRecord:
    return record_from_row(one(db, f"SELECT {RECORD_COLUMNS} FROM memories WHERE rowid = ?", (rowid,)))


def _target(db: apsw.Connection, scope: Scope, prefix: str, new: NewMemory, now_ms: int) -> tuple[int, str]:
    match = lookup.resolve_visible(db, scope, prefix, now_ms)
    if match is None:
        raise SupersedeRefused(NOT_VISIBLE, found=False)
    scope_key, superseded_by = one(db, "SELECT scope_key, superseded_by FROM memories WHERE rowid = ?", (match[0],))
    refuse_unreplaceable(
        scope_key,
        new.scope_key,
        superseded_by,
        lambda successor: lookup.resolve_visible(db, scope, successor, now_ms) is not None,
    )
    return match


def record_attributes(db: apsw.Connection, scope_key: str, rowid: int, attributes: Sequence[str]) -> None:
    """File a memory under the attribute keys it sets: a newer memory setting one finds it."""
    db.executemany(
        "INSERT OR IGNORE INTO memory_attributes (scope_key, attribute, memory_rowid) VALUES (?, ?, ?)",
        [(scope_key, attribute, rowid) for attribute in attributes],
    )


def add(db: apsw.Connection, scope: Scope, new: NewMemory, plan: Plan, now_ms: int) -> Stored:
    """Insert ``new`` (or find its duplicate) and apply ``plan``, all in one transaction: a
    refused ``supersedes`` leaves nothing behind."""
    target = _target(db, scope, plan.supersedes, new, now_ms) if plan.supersedes else None
    rowid, record, deduplicated, own_job = memories.add_row(
        db, new, now_ms, embeds_itself=plan.embeds_itself, seen_by=scope
    )
    stored = Stored(record, rowid, deduplicated, embed_job=own_job)
    if plan.key is not None:
        db.execute("UPDATE memories SET key = ? WHERE rowid = ? AND key IS NULL", (plan.key, rowid))
    if not deduplicated:
        record_attributes(db, new.scope_key, rowid, plan.attributes)
    if target is not None and target[0] != rowid:
        ruling = Ruling(True, "replaced on request (supersedes)", "explicit")
        _apply(db, stored, target[0], ruling, scope.user_id, now_ms)
    if plan.key is not None:
        for old in _key_holders(db, scope, new.scope_key, plan.key, rowid, now_ms):
            if may_replace(old, record):
                ruling = Ruling(True, f"same key {plan.key!r}: the newer wins", "key")
                _apply(db, stored, _rowid_of(db, old.id), ruling, scope.user_id, now_ms)
    if not deduplicated:
        if plan.defer:
            jobs.enqueue(db, jobs.SUPERSEDE, rowid, now_ms)
        elif plan.judge is not None and plan.attributes:
            # Without an attribute of its own the new memory has no candidates to judge.
            for old_rowid, old in attribute_candidates(db, scope, rowid, record, plan.max_candidates, now_ms):
                ruling = plan.judge(old, record)
                if ruling.supersedes:
                    _apply(db, stored, old_rowid, ruling, scope.user_id, now_ms)
    if plan.key is not None:  # the only change above to the stored row itself
        stored.record = record = record_of(db, rowid)
    if plan.owner_names is not None:
        learned = people_learning.learn(
            db,
            owner=scope.user_id,
            memory_rowid=rowid,
            content=record.content,
            subjects=record.subjects,
            owner_names=plan.owner_names,
            now_ms=now_ms,
            max_people=plan.max_people,
            strict=True,
            seen_by=scope,
        )
        stored.people_changed, stored.people_count = learned.changed, learned.people
    if not deduplicated:
        eviction.hold_cap(db, new.scope_key, now_ms)
    # A new id's first MIN_PREFIX_LENGTH characters are unique in the table (memories.insert).
    stored.short_id = (
        lookup.short_ids(db, scope, [record.id], now_ms)[record.id] if deduplicated else record.id[:MIN_PREFIX_LENGTH]
    )
    return stored


def _key_holders(
    db: apsw.Connection, scope: Scope, scope_key: str, key: str, rowid: int, now_ms: int
) -> list[MemoryRecord]:
    # Only what the adder may see right now: a group chat must not replace (nor learn the id
    # of) a memory the disclosure rules hide from it, e.g. one learned in a private chat.
    visible_sql, visible_params = predicate(scope, now_ms=now_ms)
    rows = db.execute(
        f"SELECT {RECORD_COLUMNS} FROM memories INDEXED BY memories_key "
        f"WHERE memories.scope_key = ? AND memories.key = ? AND memories.rowid != ? AND {visible_sql}",
        (scope_key, key, rowid, *visible_params),
    )
    return [record_from_row(row) for row in rows]


def _apply(db: apsw.Connection, stored: Stored, old_rowid: int, ruling: Ruling, actor: str, now_ms: int) -> None:
    replaced = mark_superseded(db, old_rowid, stored.record.id, ruling, actor, now_ms)
    if replaced is not None:
        stored.superseded.append(replaced)


def mark_superseded(
    db: apsw.Connection, old_rowid: int, new_id: str, ruling: Ruling, actor: str | None, now_ms: int
) -> str | None:
    """Mark one live memory superseded by ``new_id``; its id, or None when it was not live."""
    row = db.execute(
        "UPDATE memories SET superseded_by = ?, superseded_at_ms = ?, supersede_reason = ?, updated_at_ms = ?, "
        "vector_gen = NULL WHERE rowid = ? AND superseded_by IS NULL AND deleted_at_ms IS NULL RETURNING id",
        (new_id, now_ms, ruling.reason, now_ms, old_rowid),
    ).fetchone()
    if row is None:
        return None
    memories.drop_derived(db, [old_rowid])
    memories.audit(db, str(row[0]), "superseded", actor, now_ms, superseded_detail(new_id, ruling))
    return str(row[0])


# -- candidates ---------------------------------------------------------------------------------


def _live_older(
    db: apsw.Connection, scope: Scope, rowids: Sequence[int], new_rowid: int, now_ms: int
) -> dict[int, MemoryRecord]:
    """The older ones of ``rowids`` that ``scope`` may see (live, not superseded, disclosed)."""
    if not rowids:
        return {}
    visible_sql, visible_params = predicate(scope, now_ms=now_ms)
    placeholders = ", ".join("?" * len(rowids))
    rows = db.execute(
        f"SELECT {RECORD_COLUMNS} FROM memories WHERE memories.rowid IN ({placeholders}) "
        f"AND memories.rowid < ? AND {visible_sql}",
        (*rowids, new_rowid, *visible_params),
    )
    return {int(row[0]): record_from_row(row) for row in rows}


def attribute_candidates(
    db: apsw.Connection,
    scope: Scope,
    rowid: int,
    record: MemoryRecord,
    limit: int,
    now_ms: int,
    extra: Sequence[int] = (),
) -> list[tuple[int, MemoryRecord]]:
    """Older live memories of the same scope key and subjects that set one of the new memory's
    attribute keys (plus ``extra`` rowids, e.g. vector neighbours), newest first; only those
    ``scope`` (the adder) may see."""
    scope_key, attributes = _attributes_of(db, rowid)
    found: list[int] = list(extra)
    if attributes:
        placeholders = ", ".join("?" * len(attributes))
        found += [
            int(r)
            for (r,) in db.execute(
                f"SELECT DISTINCT memory_rowid FROM memory_attributes WHERE scope_key = ? "
                f"AND attribute IN ({placeholders}) AND memory_rowid < ? ORDER BY memory_rowid DESC LIMIT ?",
                (scope_key, *attributes, rowid, 4 * limit),
            )
        ]
    records = _live_older(db, scope, list(dict.fromkeys(found)), rowid, now_ms)
    matching = [
        (r, old)
        for r, old in sorted(records.items(), reverse=True)
        if scope_key_of(db, r) == scope_key and attribute_candidate(old, record)
    ]
    return matching[:limit]


def scope_key_of(db: apsw.Connection, rowid: int) -> str:
    (key,) = one(db, "SELECT scope_key FROM memories WHERE rowid = ?", (rowid,))
    return str(key)


#: Open verb-object keys ("did:drives"): a memory is filed under them, but looks up older
#: holders only when it says it changed, which it is also filed for ("did+:drives").
VERB_OBJECT_PREFIX, CHANGED_PREFIX = "did:", "did+:"


def _attributes_of(db: apsw.Connection, rowid: int) -> tuple[str, list[str]]:
    """The scope key of a memory and the attribute keys to find its older candidates by."""
    scope_key = scope_key_of(db, rowid)
    rows = db.execute("SELECT attribute FROM memory_attributes WHERE memory_rowid = ?", (rowid,))
    keys: list[str] = []
    for (attribute,) in rows:
        key = str(attribute)
        if key.startswith(CHANGED_PREFIX):
            keys.append(VERB_OBJECT_PREFIX + key[len(CHANGED_PREFIX) :])
        elif not key.startswith(VERB_OBJECT_PREFIX):
            keys.append(key)
    return scope_key, keys


# -- history --------------------------------------------------------------------------------------


def history(db: apsw.Connection, scope: Scope, prefix: str, now_ms: int) -> list[MemoryRecord] | None:
    """The chain of versions around the visible memory ``prefix``, oldest first; None when the
    caller sees no such memory.  Every link is re-checked with the caller's predicate, so a
    chain never reaches into a scope the caller cannot see."""
    match = lookup.resolve_visible(db, scope, prefix, now_ms)
    if match is None:
        return None
    where, params = predicate(scope, now_ms=now_ms, include_expired=True, include_superseded=True)

    def read(memory_id: str) -> tuple[int, MemoryRecord] | None:
        row = db.execute(
            f"SELECT {RECORD_COLUMNS} FROM memories WHERE memories.id = ? AND {where}", (memory_id, *params)
        ).fetchone()
        return None if row is None else (int(row[0]), record_from_row(row))

    def replaced_by(memory_id: str) -> list[str]:
        return [
            str(i)
            for (i,) in db.execute(
                "SELECT id FROM memories INDEXED BY memories_superseded_by WHERE superseded_by = ?", (memory_id,)
            )
        ]

    chain = version_chain(match[1], read, replaced_by)
    lookup.hide_unseen_successors(db, scope, chain)
    return chain
