"""Adding, listing and deleting memories, always inside the caller's scope.

Every function takes a connection already inside a transaction (see ``db.Database``) and
states visibility in its own SQL: ``scope_key IN (<caller's keys>)``, not deleted, and (unless
asked otherwise) not expired.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import apsw
import msgspec

from memoryd.errors import InvalidParams
from memoryd.ids import MIN_PREFIX_LENGTH, ULID_LENGTH, is_id_prefix, new_ulid, normalize_id_prefix
from memoryd.store import jobs, vectors
from memoryd.store.db import one
from memoryd.store.records import RECORD_COLUMNS, MemoryRecord, NewMemory, Scope, record_from_row

_encode = msgspec.json.encode

#: Upper bound for an id range: sorts after every Crockford character.
_AFTER_ALL_ID_CHARS = "~"


def content_hash(content: str) -> str:
    """Identity for dedupe: Unicode-normalised, whitespace-collapsed content."""
    canonical = " ".join(unicodedata.normalize("NFC", content).split())
    # 128 bits are plenty to tell texts apart and keep the dedupe index small.
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def _placeholders(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def audit(
    db: apsw.Connection, memory_id: str, event: str, actor: str | None, at_ms: int, detail: dict[str, Any]
) -> None:
    db.execute(
        "INSERT INTO events (memory_id, event, actor, at_ms, detail) VALUES (?, ?, ?, ?, ?)",
        (memory_id, event, actor, at_ms, _encode(detail).decode()),
    )


def find_duplicate(db: apsw.Connection, new: NewMemory, digest: str, now_ms: int) -> MemoryRecord | None:
    row = db.execute(
        f"SELECT {RECORD_COLUMNS} FROM memories "
        "WHERE scope_key = ? AND content_hash = ? AND deleted_at_ms IS NULL "
        "AND (expires_at_ms IS NULL OR expires_at_ms > ?) ORDER BY id LIMIT 1",
        (new.scope_key, digest, now_ms),
    ).fetchone()
    return None if row is None else record_from_row(row)


def insert(db: apsw.Connection, new: NewMemory, now_ms: int, *, digest: str | None = None) -> int:
    """Insert one memory (no dedupe), audit it and queue its embedding; returns its rowid."""
    memory_id = new_ulid(now_ms)
    db.execute(
        """
        INSERT INTO memories (id, content, owner, chat_id, shared, scope_key, source, subjects,
            created_at_ms, updated_at_ms, expires_at_ms, confidence, metadata, content_hash)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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
        ),
    )
    rowid = db.last_insert_rowid()
    audit(
        db,
        memory_id,
        "added",
        new.owner,
        now_ms,
        {"scope": "group" if new.shared else "personal", "chat_id": new.chat_id, "source": new.source},
    )
    if vectors.read_space(db) is not None:
        jobs.enqueue_embed(db, rowid, now_ms)
    return rowid


def add(db: apsw.Connection, new: NewMemory, now_ms: int) -> tuple[MemoryRecord, bool]:
    digest = content_hash(new.content)
    existing = find_duplicate(db, new, digest, now_ms)
    if existing is not None:
        return existing, True
    rowid = insert(db, new, now_ms, digest=digest)
    return record_from_row(one(db, f"SELECT {RECORD_COLUMNS} FROM memories WHERE rowid = ?", (rowid,))), False


def insert_many(db: apsw.Connection, news: Iterable[NewMemory], now_ms: int) -> int:
    """Bulk load without dedupe (benchmarks, imports); same rows, triggers and jobs as ``add``."""
    count = 0
    for new in news:
        insert(db, new, now_ms)
        count += 1
    return count


def _visible_sql(keys: list[str]) -> str:
    return f"scope_key IN ({_placeholders(keys)}) AND deleted_at_ms IS NULL"


def list_visible(
    db: apsw.Connection,
    scope: Scope,
    *,
    limit: int,
    offset: int,
    before_id: str | None,
    include_expired: bool,
    now_ms: int,
) -> list[MemoryRecord]:
    """Newest first. One ordered index walk per scope key, merged, so a page costs O(page)."""
    wanted = limit + offset
    if limit < 1 or wanted < 1:
        return []
    clauses = ["deleted_at_ms IS NULL"]
    params: list[object] = []
    if not include_expired:
        clauses.append("(expires_at_ms IS NULL OR expires_at_ms > ?)")
        params.append(now_ms)
    if before_id is not None:
        clauses.append("id < ?")
        params.append(before_id)
    where = " AND ".join(clauses)
    per_key = " UNION ALL ".join(
        f"SELECT * FROM (SELECT {RECORD_COLUMNS} FROM memories WHERE scope_key = ? AND {where} "
        "ORDER BY id DESC LIMIT ?)"
        for _ in scope.visible_keys()
    )
    bindings: list[object] = []
    for key in scope.visible_keys():
        bindings += [key, *params, wanted]
    rows = db.execute(f"{per_key} ORDER BY id DESC LIMIT ? OFFSET ?", (*bindings, limit, offset))
    return [record_from_row(row) for row in rows]


def fetch_visible(db: apsw.Connection, scope: Scope, rowids: Sequence[int], now_ms: int) -> dict[int, MemoryRecord]:
    """Records of ``rowids`` that the caller may see right now (the last check of a search)."""
    if not rowids:
        return {}
    keys = scope.visible_keys()
    # CROSS JOIN pins the plan to "look up each rowid": left alone, the planner may prefer
    # walking the whole scope through the scope index.
    rows = db.execute(
        f"SELECT {RECORD_COLUMNS} FROM json_each(?) AS wanted CROSS JOIN memories "
        f"ON memories.rowid = wanted.value WHERE {_visible_sql(keys)} "
        "AND (expires_at_ms IS NULL OR expires_at_ms > ?)",
        (_encode(list(rowids)).decode(), *keys, now_ms),
    )
    return {row[0]: record_from_row(row) for row in rows}


def check_id_prefix(text: str, field: str = "memory_id") -> str:
    """A normalised id or id prefix, or InvalidParams naming ``field``."""
    prefix = normalize_id_prefix(text)
    if len(prefix) < MIN_PREFIX_LENGTH:
        raise InvalidParams.for_field(field, f"must be at least {MIN_PREFIX_LENGTH} characters of a memory id")
    if len(prefix) > ULID_LENGTH or not is_id_prefix(prefix):
        raise InvalidParams.for_field(field, "is not a memory id (26 characters, 0-9 and A-Z)")
    return prefix


def _matching_ids(db: apsw.Connection, scope: Scope, prefix: str, limit: int) -> list[tuple[int, str]]:
    keys = scope.visible_keys()
    rows = db.execute(
        f"SELECT rowid, id FROM memories WHERE {_visible_sql(keys)} AND id >= ? AND id < ? ORDER BY id LIMIT ?",
        (*keys, prefix, prefix + _AFTER_ALL_ID_CHARS, limit),
    )
    return [(int(rowid), str(id_)) for rowid, id_ in rows]


def resolve_visible(db: apsw.Connection, scope: Scope, memory_id: str) -> tuple[int, str] | None:
    """(rowid, id) of the one visible memory matching ``memory_id`` (full id or unique prefix),
    None when none does; InvalidParams when the prefix is ambiguous among visible memories."""
    prefix = check_id_prefix(memory_id)
    matches = _matching_ids(db, scope, prefix, 2)
    if not matches:
        return None
    if len(matches) > 1:
        keys = scope.visible_keys()
        (count,) = one(
            db,
            f"SELECT count(*) FROM memories WHERE {_visible_sql(keys)} AND id >= ? AND id < ?",
            (*keys, prefix, prefix + _AFTER_ALL_ID_CHARS),
        )
        raise InvalidParams.for_field(
            "memory_id", f"prefix {prefix} is ambiguous: {count} of your memories match; give more characters"
        )
    return matches[0]


def get_visible(db: apsw.Connection, scope: Scope, memory_id: str, now_ms: int) -> MemoryRecord | None:
    """The visible, unexpired memory matching ``memory_id``, or None."""
    match = resolve_visible(db, scope, memory_id)
    if match is None:
        return None
    return fetch_visible(db, scope, [match[0]], now_ms).get(match[0])


def delete(db: apsw.Connection, scope: Scope, memory_id: str, now_ms: int) -> str | None:
    """Soft-delete the one visible memory matching ``memory_id`` (full id or unique prefix)."""
    match = resolve_visible(db, scope, memory_id)
    if match is None:
        return None
    rowid, full_id = match
    mark_deleted(db, rowid, now_ms)
    audit(db, full_id, "deleted", scope.user_id, now_ms, {"chat_id": scope.chat_id})
    return full_id


def mark_deleted(db: apsw.Connection, rowid: int, now_ms: int) -> None:
    """Soft-delete one row: out of FTS (trigger), the vector table and the job queue; the row
    stays for audit until gc removes it after the retention period.  The caller audits."""
    db.execute("UPDATE memories SET deleted_at_ms = ?, updated_at_ms = ? WHERE rowid = ?", (now_ms, now_ms, rowid))
    space = vectors.read_space(db)
    if space is not None:
        vectors.delete_vector(db, space, rowid)
    jobs.drop_jobs_of(db, rowid)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def short_ids(db: apsw.Connection, scope: Scope, ids: Iterable[str]) -> dict[str, str]:
    """Shortest prefix (>= MIN_PREFIX_LENGTH) of each id that no other visible memory shares.

    Ids sort, so only the two neighbours of an id in the caller's visible set matter.
    """
    result: dict[str, str] = {}
    keys = scope.visible_keys()
    for memory_id in ids:
        longest = 0
        for key in keys:
            (before,) = one(
                db,
                "SELECT max(id) FROM memories WHERE scope_key = ? AND deleted_at_ms IS NULL AND id < ?",
                (key, memory_id),
            )
            (after,) = one(
                db,
                "SELECT min(id) FROM memories WHERE scope_key = ? AND deleted_at_ms IS NULL AND id > ?",
                (key, memory_id),
            )
            for neighbour in (before, after):
                if neighbour is not None:
                    longest = max(longest, _common_prefix(memory_id, neighbour))
        result[memory_id] = memory_id[: max(MIN_PREFIX_LENGTH, longest + 1)]
    return result


def health_counts(db: apsw.Connection, now_ms: int) -> dict[str, int]:
    active, expired, deleted = one(
        db,
        """
        SELECT coalesce(sum(deleted_at_ms IS NULL AND (expires_at_ms IS NULL OR expires_at_ms > ?1)), 0),
               coalesce(sum(deleted_at_ms IS NULL AND expires_at_ms <= ?1), 0),
               coalesce(sum(deleted_at_ms IS NOT NULL), 0)
        FROM memories INDEXED BY memories_health
        """,
        (now_ms,),
    )
    (users,) = one(
        db, "SELECT count(DISTINCT owner) FROM memories INDEXED BY memories_health WHERE deleted_at_ms IS NULL"
    )
    return {
        "memories_active": int(active),
        "memories_expired": int(expired),
        "memories_deleted": int(deleted),
        "users": int(users),
    }
