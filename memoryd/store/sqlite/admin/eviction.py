"""max_entries eviction: which memories of an over-full scope go first.

Eviction order within an over-full scope (first evicted first):

0. superseded memories (hidden already: kept only for audit and history);
1. expired memories;
2. memories older than ``protect_recent`` before anything added recently (recent ones only
   when nothing else is left);
3. least recently *used*: the day of the last retrieval, or of creation when never
   retrieved (so "oldest" and "least recently retrieved" are one key);
4. lowest confidence (within the same day);
5. oldest, then id (deterministic).

Evicted memories are soft-deleted and audited 'evicted'; gc removes them later.
"""

from __future__ import annotations

from typing import Any

import apsw

from memoryd.ids import DAY_MS
from memoryd.store.sqlite.admin.retention import ACTOR, BATCH
from memoryd.store.sqlite.db.database import one
from memoryd.store.sqlite.memories import memories
from memoryd.store.visibility import PERSONAL_PREFIX, kind_of_key

#: What max_entries = 0 ("unlimited") means in SQL.
_UNLIMITED = 1 << 62


def over_limit(db: apsw.Connection, per_user: int, per_chat: int) -> list[tuple[str, int, int]]:
    """Scopes holding more live (not deleted) memories than allowed: (scope_key, count, limit).

    A personal memory counts towards its owner, a group memory towards its chat; 0 = no limit.
    """
    user_limit = per_user or _UNLIMITED
    chat_limit = per_chat or _UNLIMITED
    rows: list[tuple[Any, ...]] = db.execute(
        """
        SELECT scope_key, count(*) AS n FROM memories INDEXED BY memories_scope_id
        WHERE deleted_at_ms IS NULL
        GROUP BY scope_key
        HAVING n > CASE WHEN scope_key GLOB ?3 THEN ?1 ELSE ?2 END
        """,
        (user_limit, chat_limit, PERSONAL_PREFIX + "*"),
    ).fetchall()
    limits = {"personal": user_limit, "group": chat_limit}
    return [(str(key), int(n), limits[kind_of_key(str(key))]) for key, n in rows]


#: The eviction order, first evicted first (see the module docstring).
EVICTION_ORDER = f"""
    (superseded_by IS NOT NULL) DESC,
    (expires_at_ms IS NOT NULL AND expires_at_ms <= :now) DESC,
    (created_at_ms >= :protect_since) ASC,
    max(created_at_ms, coalesce(last_access_ms, 0)) / {DAY_MS} ASC,
    confidence ASC,
    created_at_ms ASC,
    id ASC
"""


def eviction_candidates(
    db: apsw.Connection, scope_key: str, count: int, now_ms: int, protect_since_ms: int
) -> list[tuple[int, str, bool, bool]]:
    """The ``count`` memories of a scope to evict first: (rowid, id, expired, recent)."""
    rows = db.execute(
        f"""
        SELECT rowid, id, (expires_at_ms IS NOT NULL AND expires_at_ms <= :now),
               (created_at_ms >= :protect_since)
        FROM memories WHERE scope_key = :key AND deleted_at_ms IS NULL
        ORDER BY {EVICTION_ORDER}
        LIMIT :count
        """,
        {"now": now_ms, "protect_since": protect_since_ms, "key": scope_key, "count": count},
    )
    return [(int(rowid), str(id_), bool(expired), bool(recent)) for rowid, id_, expired, recent in rows]


def evict_batch(
    db: apsw.Connection, scope_key: str, limit: int, now_ms: int, protect_since_ms: int, batch: int = BATCH
) -> int:
    """Soft-delete up to ``batch`` memories of an over-full scope; returns how many."""
    (live,) = one(db, "SELECT count(*) FROM memories WHERE scope_key = ? AND deleted_at_ms IS NULL", (scope_key,))
    excess = min(int(live) - limit, batch)
    if excess <= 0:
        return 0
    scope = kind_of_key(scope_key)
    victims = eviction_candidates(db, scope_key, excess, now_ms, protect_since_ms)
    for rowid, memory_id, expired, recent in victims:
        memories.mark_deleted(db, rowid, now_ms)
        memories.audit(
            db,
            memory_id,
            "evicted",
            ACTOR,
            now_ms,
            {"reason": "max_entries", "scope": scope, "limit": limit, "expired": expired, "recent": recent},
        )
    return len(victims)
