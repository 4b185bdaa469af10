"""Memories: add (with exact-duplicate refresh), list, get and delete by id or unique prefix,
short ids and health counts, always inside the caller's scope (``visibility.py``).

Every function takes a psycopg connection inside a transaction (``db.Database.run``).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import msgspec
import psycopg

from memoryd.errors import AmbiguousIdPrefix, UnknownListCursor
from memoryd.ids import MIN_PREFIX_LENGTH, new_id, unique_prefix
from memoryd.store.postgres import notices, tokens
from memoryd.store.postgres.visibility import live, predicate
from memoryd.store.records import (
    DEFAULT_MEMORY_TYPE,
    NO_PROVENANCE,
    PROVENANCE_COLUMNS,
    MemoryRecord,
    NewMemory,
    record_columns,
    record_from_row,
)
from memoryd.store.visibility import Disclosure, Scope

Conn = psycopg.Connection[Any]
_encode = msgspec.json.encode

EMBED = "embed"
SUPERSEDE = "supersede"

#: The select list of ``record_from_row`` (the memories table aliased ``m``).
RECORD_COLUMNS = record_columns("m")


def record(row: Sequence[Any]) -> MemoryRecord:
    return record_from_row(tuple(row))


def content_hash(content: str) -> bytes:
    """Identity for dedupe: Unicode-normalised, whitespace-collapsed content (as SQLite's)."""
    canonical = " ".join(unicodedata.normalize("NFC", content).split())
    return hashlib.sha256(canonical.encode("utf-8")).digest()[:16]


def audit(
    conn: Conn, scope_key: str, memory_id: str, event: str, actor: str | None, at_ms: int, detail: dict[str, Any]
) -> None:
    conn.execute(
        "INSERT INTO audit_events (scope_key, memory_id, event, actor, at_ms, detail) VALUES (%s, %s, %s, %s, %s, %s)",
        (scope_key, memory_id, event, actor, at_ms, _encode(detail).decode()),
    )


def vector_generation(conn: Conn) -> int | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'vector_generation'").fetchone()
    return None if row is None else int(row[0])


def _duplicate(
    conn: Conn, new: NewMemory, digest: bytes, now_ms: int, seen_by: Scope | None = None
) -> psycopg.Cursor[Any]:
    """An identical live memory learned in the same chat with the same disclosure code; with
    ``seen_by`` (the adder), only one the adder may see: a memory hidden from the adder's chat
    is never answered as its duplicate.  The query, sent: its row is read by the caller (in a
    pipeline, together with the statements sent after it)."""
    live_sql, live_params = live(now_ms=now_ms)
    if seen_by is not None:
        visible_sql, visible_params = predicate(seen_by, now_ms=now_ms)
        live_sql, live_params = f"{live_sql} AND {visible_sql}", (*live_params, *visible_params)
    provenance = new.provenance or NO_PROVENANCE
    code = Disclosure.of(provenance.chat_type, provenance.sensitivity, provenance.conversation_private).code
    return conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM memories AS m WHERE m.scope_key = %s AND m.content_hash = %s AND {live_sql} "
        "AND m.disclosure = %s AND m.chat_id IS NOT DISTINCT FROM %s ORDER BY m.rowid LIMIT 1",
        (new.scope_key, digest, *live_params, code, new.chat_id),
    )


def _prefix_taken(conn: Conn, memory_id: str) -> psycopg.Cursor[Any]:
    """Whether a stored id starts as ``memory_id`` does (a row if so); sent, read by the caller."""
    prefix = memory_id[:MIN_PREFIX_LENGTH]
    return conn.execute("SELECT 1 FROM memories WHERE id >= %s AND id < %s LIMIT 1", (prefix, prefix + "~"))


def unused_id(conn: Conn) -> str:
    """A new id whose first MIN_PREFIX_LENGTH characters no stored id starts with."""
    while True:
        memory_id = new_id()
        if _prefix_taken(conn, memory_id).fetchone() is None:
            return memory_id


_PROVENANCE_NAMES = ", ".join(PROVENANCE_COLUMNS)
_INSERT = (
    "INSERT INTO memories AS m (scope_key, id, content, owner, chat_id, shared, source, subjects, created_at_ms, "
    f"updated_at_ms, expires_at_ms, confidence, metadata, content_hash, disclosure, terms, term_freqs, doc_len, "
    f"{_PROVENANCE_NAMES}) VALUES ({', '.join(['%s'] * (18 + len(PROVENANCE_COLUMNS)))}) RETURNING {RECORD_COLUMNS}"
)
#: The insert and its embed job in one statement (one round trip); the job only once a vector
#: space exists (until then there is nothing to embed into).  The last column: whether a job
#: was queued (the other daemons' idle workers are then woken).
_INSERT_QUEUED = (
    f"WITH new AS ({_INSERT}), queued AS (INSERT INTO jobs (scope_key, kind, memory_rowid, due_at_ms, created_at_ms) "
    "SELECT %s, %s, new.rowid, %s, %s FROM new WHERE EXISTS (SELECT 1 FROM meta WHERE key = 'vector_generation') "
    "ON CONFLICT (scope_key, kind, memory_rowid) DO NOTHING RETURNING 1) "
    "SELECT new.*, EXISTS (SELECT 1 FROM queued) FROM new"
)


def insert(
    conn: Conn,
    new: NewMemory,
    now_ms: int,
    *,
    memory_id: str | None = None,
    created_at_ms: int | None = None,
    queue_embed: bool = True,
) -> tuple[int, str]:
    """Insert one memory (no dedupe) and queue its embedding; (rowid, id)."""
    record = insert_record(conn, new, now_ms, memory_id=memory_id, created_at_ms=created_at_ms, queue_embed=queue_embed)
    return record[0], record[1].id


def insert_record(
    conn: Conn,
    new: NewMemory,
    now_ms: int,
    *,
    memory_id: str | None = None,
    created_at_ms: int | None = None,
    queue_embed: bool = True,
) -> tuple[int, MemoryRecord]:
    """``insert``, with the stored record (read back by the INSERT itself)."""
    rowid, stored, _queued = _insert(conn, new, now_ms, memory_id, created_at_ms, queue_embed)
    return rowid, stored


def _insert(
    conn: Conn, new: NewMemory, now_ms: int, memory_id: str | None, created_at_ms: int | None, queue_embed: bool
) -> tuple[int, MemoryRecord, bool]:
    """(rowid, record, whether an embed job was queued)."""
    memory_id = memory_id or unused_id(conn)
    provenance = new.provenance or NO_PROVENANCE
    code = Disclosure.of(provenance.chat_type, provenance.sensitivity, provenance.conversation_private).code
    row = conn.execute(
        _INSERT_QUEUED if queue_embed else _INSERT,
        (
            new.scope_key,
            memory_id,
            new.content,
            new.owner,
            new.chat_id,
            bool(new.shared),
            new.source,
            _encode(new.subjects).decode(),
            now_ms if created_at_ms is None else created_at_ms,
            now_ms,
            new.expires_at_ms,
            float(new.confidence),
            _encode(new.metadata).decode(),
            content_hash(new.content),
            code,
            *tokens.document_terms(new.content, new.subjects),
            *[getattr(provenance, name) for name in PROVENANCE_COLUMNS],
            *((new.scope_key, EMBED, now_ms, now_ms) if queue_embed else ()),
        ),
    ).fetchone()
    assert row is not None
    if queue_embed:
        return int(row[0]), record(row[:-1]), bool(row[-1])
    return int(row[0]), record(row), False


def enqueue(conn: Conn, scope_key: str, kind: str, rowid: int, now_ms: int) -> None:
    conn.execute(
        "INSERT INTO jobs (scope_key, kind, memory_rowid, due_at_ms, created_at_ms) VALUES (%s, %s, %s, %s, %s) "
        "ON CONFLICT (scope_key, kind, memory_rowid) DO NOTHING",
        (scope_key, kind, rowid, now_ms, now_ms),
    )


def fetch(conn: Conn, rowid: int) -> MemoryRecord:
    row = conn.execute(f"SELECT {RECORD_COLUMNS} FROM memories AS m WHERE m.rowid = %s", (rowid,)).fetchone()
    assert row is not None
    return record(row)


class Added(NamedTuple):
    rowid: int
    record: MemoryRecord
    duplicate: bool
    #: Whether an embed job was queued (idle workers are to be woken).
    queued: bool = False


def add(conn: Conn, new: NewMemory, now_ms: int, seen_by: Scope | None = None) -> Added:
    """Dedupe, then insert (the caller holds the scope's lock).  The duplicate check and the
    new id's prefix check are sent together: in a pipeline, one round trip for both."""
    found = _duplicate(conn, new, content_hash(new.content), now_ms, seen_by)
    memory_id = new_id()
    taken = _prefix_taken(conn, memory_id)
    row = found.fetchone()
    if row is not None:
        existing = record(row)
        (rowid,) = conn.execute(
            "UPDATE memories SET updated_at_ms = %s WHERE scope_key = %s AND id = %s RETURNING rowid",
            (now_ms, new.scope_key, existing.id),
        ).fetchone() or (0,)
        return Added(int(rowid), existing, True)
    if taken.fetchone() is not None:
        memory_id = unused_id(conn)
    rowid, stored, queued = _insert(conn, new, now_ms, memory_id, None, True)
    return Added(rowid, stored, False, queued)


def insert_many(conn: Conn, news: Iterable[NewMemory], now_ms: int) -> int:
    count = 0
    for new in news:
        insert(conn, new, now_ms)
        count += 1
    return count


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


def mark_deleted(conn: Conn, rowids: Sequence[int], now_ms: int) -> None:
    conn.execute(
        "UPDATE memories SET deleted_at_ms = %s, updated_at_ms = %s WHERE rowid = ANY(%s) AND deleted_at_ms IS NULL",
        (now_ms, now_ms, list(rowids)),
    )
    drop_derived(conn, rowids)


def drop_derived(conn: Conn, rowids: Sequence[int]) -> None:
    conn.execute("DELETE FROM memory_vectors WHERE rowid = ANY(%s)", (list(rowids),))
    conn.execute("DELETE FROM jobs WHERE memory_rowid = ANY(%s)", (list(rowids),))


def delete(conn: Conn, scope: Scope, prefix: str, now_ms: int) -> str | None:
    match = resolve(conn, scope, prefix, now_ms)
    if match is None:
        return None
    rowid, full_id, key = match
    mark_deleted(conn, [rowid], now_ms)
    audit(conn, key, full_id, "deleted", scope.user_id, now_ms, {"chat_id": scope.chat_id})
    notices.send(conn, notices.CHANGES, key)
    return full_id


def list_visible(
    conn: Conn,
    scope: Scope,
    *,
    limit: int,
    offset: int,
    before_id: str | None,
    include_expired: bool,
    about: Sequence[int] | None,
    now_ms: int,
    types: Sequence[str] | None = None,
) -> list[MemoryRecord]:
    """Newest first by (created_at_ms, rowid): one walk per visible scope key, merged."""
    wanted = limit + offset
    if limit < 1 or wanted < 1:
        return []
    after: tuple[int, int] | None = None
    if before_id is not None:
        where, params = predicate(scope, now_ms=now_ms, include_deleted=True)
        rows = conn.execute(
            f"SELECT m.created_at_ms, m.rowid FROM memories AS m WHERE {where} AND m.id >= %s AND m.id < %s LIMIT 2",
            (*params, before_id, before_id + "~"),
        ).fetchall()
        if len(rows) > 1:
            raise AmbiguousIdPrefix(before_id, len(rows))
        if not rows:
            raise UnknownListCursor(before_id)
        after = (int(rows[0][0]), int(rows[0][1]))
    selects: list[str] = []
    bindings: list[object] = []
    for key in scope.visible_keys():
        where, params = predicate(scope, now_ms=now_ms, include_expired=include_expired, key=key)
        if after is not None:
            where, params = f"{where} AND (m.created_at_ms, m.rowid) < (%s, %s)", (*params, *after)
        if about is not None:
            where, params = (
                f"{where} AND m.rowid IN (SELECT memory_rowid FROM memory_people WHERE person_rowid = ANY(%s))",
                (*params, list(about)),
            )
        if types is None:
            where += " AND m.memory_type IS DISTINCT FROM 'episode'"
        else:
            where, params = (
                f"{where} AND coalesce(m.memory_type, %s) = ANY(%s)",
                (*params, DEFAULT_MEMORY_TYPE, list(types)),
            )
        selects.append(
            f"(SELECT {RECORD_COLUMNS} FROM memories AS m WHERE {where} "
            "ORDER BY m.created_at_ms DESC, m.rowid DESC LIMIT %s)"
        )
        bindings += [*params, wanted]
    page = conn.execute(
        f"SELECT * FROM ({' UNION ALL '.join(selects)}) AS page ORDER BY created_at_ms DESC, rowid DESC LIMIT %s OFFSET %s",
        (*bindings, limit, offset),
    )
    return [record(row) for row in page]


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
        detail: dict[str, Any] = {"chat_id": scope.chat_id}
        if pinned and expires_at_ms is not None:
            detail["expires_at_ms"] = int(expires_at_ms)
        audit(conn, key, full_id, "pinned" if pinned else "unpinned", scope.user_id, now_ms, detail)
        notices.send(conn, notices.CHANGES, key)
    return fetch_visible(conn, scope, [rowid], now_ms, include_superseded=True).get(rowid)


def hide_unseen_successors(conn: Conn, scope: Scope, records: Iterable[MemoryRecord]) -> None:
    """Clear ``superseded_by`` and ``supersede_reason`` of each record replaced by a memory that
    ``scope`` may not see: the id would name it and the reason quotes its content.
    ``superseded_at`` stays: the record was replaced, by nothing the caller can look at."""
    replaced = [r for r in records if r.superseded_by is not None]
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
    for r in replaced:
        if r.superseded_by not in seen:
            r.superseded_by = None
            r.supersede_reason = None


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


#: The owners of live memories, counted by stepping from one to the next through memories_owner
#: (one index probe per owner): count(DISTINCT owner) sorts every live row, about 0.4-0.9 s at a
#: million memories against 30-45 ms this way for ten thousand owners.
_OWNERS = (
    "WITH RECURSIVE o(owner) AS ("
    "(SELECT owner FROM memories WHERE deleted_at_ms IS NULL ORDER BY owner LIMIT 1) "
    "UNION ALL SELECT (SELECT m.owner FROM memories AS m WHERE m.deleted_at_ms IS NULL AND m.owner > o.owner "
    "ORDER BY m.owner LIMIT 1) FROM o WHERE o.owner IS NOT NULL) "
    "SELECT count(owner) FROM o"
)


def health_counts(conn: Conn, now_ms: int) -> dict[str, Any]:
    """Exact counts without reading every row: live and deleted memories from ``memory_counts``
    (the writes' own tallies, schema M005), the expired among the live through the expiry index
    (only memories given an expiry), the users through the owner index."""
    live, deleted, expired, users = conn.execute(
        "SELECT t.live, t.deleted, "
        "(SELECT count(*) FROM memories WHERE expires_at_ms <= %s AND deleted_at_ms IS NULL), "
        f"({_OWNERS}) FROM (SELECT coalesce(sum(live), 0), coalesce(sum(deleted), 0) FROM memory_counts) AS t(live, deleted)",
        (now_ms,),
    ).fetchone() or (0, 0, 0, 0)
    (size,) = conn.execute("SELECT pg_database_size(current_database())").fetchone() or (0,)
    return {
        "memories_active": int(live) - int(expired),
        "memories_expired": int(expired),
        "memories_deleted": int(deleted),
        "users": int(users),
        "db_bytes": int(size),
    }


def write_hits(conn: Conn, entries: Sequence[tuple[str, int, int]]) -> int:
    """(memory id, count, last_ms) per memory read by search, list or get."""
    if not entries:
        return 0
    conn.execute(
        "UPDATE memories AS m SET access_count = m.access_count + h.n, last_access_ms = greatest(coalesce(m.last_access_ms, 0), h.at) "
        "FROM unnest(%s::text[], %s::int[], %s::bigint[]) AS h(id, n, at) WHERE m.id = h.id",
        ([e[0] for e in entries], [e[1] for e in entries], [e[2] for e in entries]),
    )
    return len(entries)
