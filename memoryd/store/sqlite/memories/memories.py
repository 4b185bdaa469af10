"""Adding, listing and deleting memories, always inside the caller's scope.

Every function takes a connection already inside a transaction (see ``db.Database``); what a
caller may see comes from ``visibility.predicate``.  Id prefixes and short ids are in
``lookup.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import apsw
import msgspec

from memoryd.ids import MIN_PREFIX_LENGTH, new_id
from memoryd.store.memory_rules import (
    ListPosition,
    content_hash,
    disclosure_code,
    list_position,
    provenance_values,
)
from memoryd.store.records import (
    DEFAULT_MEMORY_TYPE,
    NO_PROVENANCE,
    PROVENANCE_COLUMNS,
    RECORD_COLUMNS,
    EmbedJob,
    MemoryRecord,
    NewMemory,
    record_from_row,
)
from memoryd.store.sqlite.db.database import one
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.vectors import vectors
from memoryd.store.sqlite.visibility_sql import live, predicate
from memoryd.store.visibility import Scope

_encode = msgspec.json.encode
_PROVENANCE_NAMES = ", ".join(PROVENANCE_COLUMNS)
_PROVENANCE_SLOTS = ", ".join("?" * len(PROVENANCE_COLUMNS))

#: The rowid of a memory being inserted: above every rowid in use and above the newest one
#: ever deleted (kept by schema m016's trigger), so that no rowid ever names two memories.
#: SQLite's own choice (the highest plus one) would hand a deleted newest memory's rowid to
#: the next memory, and work still naming the old one (a job finishing late) would land on it.
NEXT_ROWID = (
    "(SELECT max(coalesce((SELECT max(rowid) FROM memories), 0), "
    "coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'memories_rowid_floor'), 0)) + 1)"
)


def audit(
    db: apsw.Connection, memory_id: str, event: str, actor: str | None, at_ms: int, detail: dict[str, Any]
) -> None:
    """Store an audit event (``audit_events``; read through the view ``events``, which adds
    each memory's ``added`` event from its row: schema m011)."""
    db.execute(
        "INSERT INTO audit_events (memory_id, event, actor, at_ms, detail) VALUES (?, ?, ?, ?, ?)",
        (memory_id, event, actor, at_ms, _encode(detail).decode()),
    )


def _duplicate_row(
    db: apsw.Connection, new: NewMemory, digest: bytes, now_ms: int, seen_by: Scope | None = None
) -> tuple[Any, ...] | None:
    """The record row of an identical live memory learned in the same chat with the same
    disclosure code: so it is shown exactly where the new one would be (a duplicate hidden from
    the adder's chat is neither revealed nor allowed to swallow the new provenance).  With
    ``seen_by`` (the adder), only one that the adder may see: a group member's sensitive memory,
    hidden from the group, is never answered as another member's duplicate."""
    live_sql, live_params = live(now_ms=now_ms)
    if seen_by is not None:
        visible_sql, visible_params = predicate(seen_by, now_ms=now_ms)
        live_sql, live_params = f"{live_sql} AND {visible_sql}", (*live_params, *visible_params)
    row = db.execute(
        # Pinned: left alone, the planner may walk the whole scope through another index
        # (~20 ms per add in a scope of 10k memories).
        f"SELECT {RECORD_COLUMNS} FROM memories INDEXED BY memories_dedupe "
        f"WHERE memories.scope_key = ? AND memories.content_hash = ? AND {live_sql} "
        "AND memories.disclosure = ? AND memories.chat_id IS ? ORDER BY memories.rowid LIMIT 1",
        (new.scope_key, digest, *live_params, disclosure_code(new), new.chat_id),
    ).fetchone()
    return None if row is None else tuple(row)


def _unused_short_id(db: apsw.Connection) -> str:
    """A new id whose first MIN_PREFIX_LENGTH characters no other id in the table starts with,
    so the short id sandbox tools show and delete by names one memory.  A clash is a ~10^-12
    event per stored id; one indexed probe per insert rules it out."""
    while True:
        memory_id = new_id()
        prefix = memory_id[:MIN_PREFIX_LENGTH]
        taken = db.execute("SELECT 1 FROM memories WHERE id >= ? AND id < ? LIMIT 1", (prefix, prefix + "~")).fetchone()
        if taken is None:
            return memory_id


def insert(db: apsw.Connection, new: NewMemory, now_ms: int, *, digest: bytes | None = None) -> int:
    """Insert one memory (no dedupe), audit it and queue its embedding; returns its rowid."""
    return insert_leasing(db, new, now_ms, digest=digest)[0]


def insert_leasing(
    db: apsw.Connection, new: NewMemory, now_ms: int, *, digest: bytes | None = None, embeds_itself: bool = False
) -> tuple[int, EmbedJob | None]:
    """``insert``; ``embeds_itself``: the embed job is leased to the caller, who embeds the
    text at once (``jobs.OWN_LEASE_MS``), and returned with the rowid."""
    memory_id = _unused_short_id(db)
    db.execute(
        f"""
        INSERT INTO memories (rowid, id, content, owner, chat_id, shared, scope_key, source, subjects,
            created_at_ms, updated_at_ms, expires_at_ms, confidence, metadata, content_hash,
            {_PROVENANCE_NAMES})
        VALUES ({NEXT_ROWID}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {_PROVENANCE_SLOTS})
        """,
        (
            memory_id,
            new.content,
            new.owner,
            new.chat_id,
            int(new.shared),
            new.scope_key,
            new.source,
            _encode(new.subjects).decode(),
            now_ms,
            now_ms,
            new.expires_at_ms,
            float(new.confidence),
            _encode(new.metadata).decode(),
            digest or content_hash(new.content),
            *provenance_values(new.provenance or NO_PROVENANCE),
        ),
    )
    rowid = db.last_insert_rowid()
    # No 'added' event: the row says who added it and when (the view ``events`` shows it; a
    # purge stores it, ``record_adds``).  A million of them took ~105 bytes each with their index.
    space = vectors.read_space(db)
    if space is None:
        return rowid, None
    if not embeds_itself:
        jobs.enqueue_embed(db, rowid, now_ms)
        return rowid, None
    job_id = jobs.enqueue(db, jobs.EMBED, rowid, now_ms, leased_until_ms=now_ms + jobs.OWN_LEASE_MS)
    job = None if job_id is None else EmbedJob(job_id, rowid, memory_id, new.content, 0, space.generation)
    return rowid, job


def add(db: apsw.Connection, new: NewMemory, now_ms: int) -> tuple[MemoryRecord, bool]:
    row = add_row(db, new, now_ms)
    return row.record, row.deduplicated


class AddedRow(NamedTuple):
    rowid: int
    record: MemoryRecord
    deduplicated: bool  # an identical live memory was found and nothing inserted
    own_job: EmbedJob | None = None  # the embed job leased to the adder (``embeds_itself``)


def add_row(
    db: apsw.Connection, new: NewMemory, now_ms: int, *, embeds_itself: bool = False, seen_by: Scope | None = None
) -> AddedRow:
    """``add`` with the row's rowid (what the rest of an add transaction keys on); ``seen_by``:
    the adder, whose visibility bounds the duplicate it may be answered with."""
    digest = content_hash(new.content)
    existing = _duplicate_row(db, new, digest, now_ms, seen_by)
    if existing is None:
        rowid, job = insert_leasing(db, new, now_ms, digest=digest, embeds_itself=embeds_itself)
        record = record_from_row(one(db, f"SELECT {RECORD_COLUMNS} FROM memories WHERE rowid = ?", (rowid,)))
        return AddedRow(rowid, record, False, job)
    return AddedRow(int(existing[0]), record_from_row(existing), True)


def insert_many(db: apsw.Connection, news: Iterable[NewMemory], now_ms: int) -> int:
    """Bulk load without dedupe (benchmarks, imports); same rows, triggers and jobs as ``add``."""
    count = 0
    for new in news:
        insert(db, new, now_ms)
        count += 1
    return count


def position_of(db: apsw.Connection, scope: Scope, prefix: str, now_ms: int) -> ListPosition:
    """The list position of the memory ``prefix`` names among what ``scope`` may see (deleted or
    expired since included: a page's last memory stays a valid cursor)."""
    where, params = predicate(scope, now_ms=now_ms, include_deleted=True)
    rows: list[tuple[Any, ...]] = db.execute(
        f"SELECT created_at_ms, rowid FROM memories WHERE {where} AND memories.id >= ? AND memories.id < ? LIMIT 2",
        (*params, prefix, prefix + "~"),
    ).fetchall()
    return list_position(prefix, rows)


#: Positions (1-based) of created_at_ms and rowid in RECORD_COLUMNS, for the merged ORDER BY.
_ORDER_COLUMNS = ", ".join(
    f"{RECORD_COLUMNS.split(', ').index(name) + 1} DESC" for name in ("memories.created_at_ms", "memories.rowid")
)


def list_visible(
    db: apsw.Connection,
    scope: Scope,
    *,
    limit: int,
    offset: int,
    before_id: str | None,
    include_expired: bool,
    now_ms: int,
    types: Sequence[str] | None = None,
) -> list[MemoryRecord]:
    """``types``: only memories of these types (None: every type but episodes).  Newest first, continuing after the memory ``before_id`` names (a normalised id or prefix).  One walk of the (scope_key, created_at_ms,
    rowid) index per scope key, merged, so a page costs O(page) rows plus the rows the
    disclosure rules hide on the way."""
    wanted = limit + offset
    if limit < 1 or wanted < 1:
        return []
    after = None if before_id is None else position_of(db, scope, before_id, now_ms)
    selects: list[str] = []
    bindings: list[object] = []
    for key in scope.visible_keys():
        where, params = predicate(scope, now_ms=now_ms, include_expired=include_expired, key=key)
        if after is not None:
            where, params = f"{where} AND (memories.created_at_ms, memories.rowid) < (?, ?)", (*params, *after)
        if types is None:
            where += " AND memories.memory_type IS NOT 'episode'"
        else:
            where = f"{where} AND coalesce(memories.memory_type, '{DEFAULT_MEMORY_TYPE}') IN (SELECT value FROM json_each(?))"
            params = (*params, _encode(list(types)).decode())
        selects.append(
            f"SELECT * FROM (SELECT {RECORD_COLUMNS} FROM memories WHERE {where} "
            "ORDER BY memories.created_at_ms DESC, memories.rowid DESC LIMIT ?)"
        )
        bindings += [*params, wanted]
    rows = db.execute(
        f"{' UNION ALL '.join(selects)} ORDER BY {_ORDER_COLUMNS} LIMIT ? OFFSET ?", (*bindings, limit, offset)
    )
    return [record_from_row(row) for row in rows]


def fetch_visible(
    db: apsw.Connection, scope: Scope, rowids: Sequence[int], now_ms: int, *, include_superseded: bool = False
) -> dict[int, MemoryRecord]:
    """Records of ``rowids`` that the caller may see right now (the last check of a search)."""
    if not rowids:
        return {}
    where, params = predicate(scope, now_ms=now_ms, include_superseded=include_superseded)
    # CROSS JOIN pins the plan to "look up each rowid": left alone, the planner may prefer
    # walking the whole scope through the scope index.
    rows = db.execute(
        f"SELECT {RECORD_COLUMNS} FROM json_each(?) AS wanted CROSS JOIN memories "
        f"ON memories.rowid = wanted.value WHERE {where}",
        (_encode(list(rowids)).decode(), *params),
    )
    return {row[0]: record_from_row(row) for row in rows}


def mark_deleted(db: apsw.Connection, rowid: int, now_ms: int) -> None:
    """Soft-delete one row: out of FTS (trigger), the vector table and the job queue; the row
    stays for audit until gc removes it after the retention period.  The caller audits."""
    db.execute("UPDATE memories SET deleted_at_ms = ?, updated_at_ms = ? WHERE rowid = ?", (now_ms, now_ms, rowid))
    drop_derived(db, [rowid])


def record_adds(db: apsw.Connection, rowids: Sequence[int]) -> None:
    """Store the ``added`` event of memories about to be purged, from their rows (which until
    then are the record of the add: schema m011), unless their trail has one already or began
    with an import."""
    db.executemany(
        "INSERT INTO audit_events (memory_id, event, actor, at_ms, detail) "
        "SELECT m.id, 'added', m.owner, m.created_at_ms, '{}' FROM memories AS m WHERE m.rowid = ? "
        "AND NOT EXISTS (SELECT 1 FROM audit_events AS a WHERE a.memory_id = m.id AND a.event IN ('added', 'imported'))",
        [(rowid,) for rowid in rowids],
    )


def drop_derived(db: apsw.Connection, rowids: Sequence[int]) -> None:
    """Remove what only live memories have: their vectors and their jobs (FTS: the triggers)."""
    space = vectors.read_space(db)
    if space is not None:
        vectors.delete_vectors(db, space, rowids)
    jobs.drop_jobs_of(db, rowids)
