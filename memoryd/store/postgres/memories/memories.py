"""Memory rows on PostgreSQL: add (with exact-duplicate refresh), insert, list and soft-delete,
always inside the caller's scope (``visibility.py``); by id in ``lookup.py``.

Every function takes a psycopg connection inside a transaction (``db.Database.run``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import msgspec
import psycopg

from memoryd.ids import MIN_PREFIX_LENGTH, new_id
from memoryd.store.memory_rules import content_hash, disclosure_code, list_position, provenance_values
from memoryd.store.postgres import tokens
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
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]
_encode = msgspec.json.encode

EMBED = "embed"
SUPERSEDE = "supersede"

#: The select list of ``record_from_row`` (the memories table aliased ``m``).
RECORD_COLUMNS = record_columns("m")


def record(row: Sequence[Any]) -> MemoryRecord:
    return record_from_row(tuple(row))


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
    return conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM memories AS m WHERE m.scope_key = %s AND m.content_hash = %s AND {live_sql} "
        "AND m.disclosure = %s AND m.chat_id IS NOT DISTINCT FROM %s ORDER BY m.rowid LIMIT 1",
        (new.scope_key, digest, *live_params, disclosure_code(new), new.chat_id),
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
    rowid, stored, _queued = _insert(conn, new, now_ms, memory_id, created_at_ms, queue_embed)
    return rowid, stored.id


def _insert(
    conn: Conn, new: NewMemory, now_ms: int, memory_id: str | None, created_at_ms: int | None, queue_embed: bool
) -> tuple[int, MemoryRecord, bool]:
    """(rowid, record, whether an embed job was queued)."""
    memory_id = memory_id or unused_id(conn)
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
            disclosure_code(new),
            *tokens.document_terms(new.content, new.subjects),
            *provenance_values(new.provenance or NO_PROVENANCE),
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


def mark_deleted(conn: Conn, rowids: Sequence[int], now_ms: int) -> None:
    conn.execute(
        "UPDATE memories SET deleted_at_ms = %s, updated_at_ms = %s WHERE rowid = ANY(%s) AND deleted_at_ms IS NULL",
        (now_ms, now_ms, list(rowids)),
    )
    drop_derived(conn, rowids)


def drop_derived(conn: Conn, rowids: Sequence[int]) -> None:
    conn.execute("DELETE FROM memory_vectors WHERE rowid = ANY(%s)", (list(rowids),))
    conn.execute("DELETE FROM jobs WHERE memory_rowid = ANY(%s)", (list(rowids),))


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
        after = list_position(before_id, rows)
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
