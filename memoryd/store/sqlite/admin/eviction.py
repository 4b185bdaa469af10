"""max_entries eviction: which memories of an over-full scope go first.

The cap holds at all times: an add that takes a scope past it evicts in its own transaction
(``hold_cap``), and maintenance and `memoryd gc` evict whatever a lowered cap left over.
Pinned memories are never evicted, and episodes (observed messages) are not counted: they
have a retention of their own.

Eviction order within an over-full scope (first evicted first):

0. superseded memories (hidden already: kept only for audit and history);
1. expired memories;
2. the lowest ``STRENGTH`` (see below) among the scope's ``STRENGTH_POOL`` oldest memories,
   then the oldest (by insertion when two share a millisecond).

Strength adds up what makes a memory worth keeping (each term is bounded, so none swamps the
others):

* its type: identity 3, relationship 2.5, preference 2, knowledge (or none) 1.5, event and
  task 1, context and observation 0.5;
* +2 when it concerns health or safety (an allergy, a medication, a medical condition, an
  emergency contact): losing one costs far more than keeping trivia;
* +1 when the speaker stated it about themselves (a first-hand fact, not hearsay);
* use: up to +2 as it is found by searches and reads (count / (count + 3));
* recency: up to +1.5, halving 30 days after it was last found (or added);
* +1 while it is younger than ``protect_recent_days``;
* its confidence (0..1).

Evicted memories are soft-deleted and audited 'evicted'; gc removes them later.
"""

from __future__ import annotations

from typing import Any

import apsw

from memoryd.ids import DAY_MS
from memoryd.store.records import MemoryRecord, NewMemory
from memoryd.store.sqlite.admin.retention import ACTOR, BATCH
from memoryd.store.sqlite.db import meta
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
        WHERE deleted_at_ms IS NULL AND memory_type IS NOT 'episode'
        GROUP BY scope_key
        HAVING n > CASE WHEN scope_key GLOB ?3 THEN ?1 ELSE ?2 END
        """,
        (user_limit, chat_limit, PERSONAL_PREFIX + "*"),
    ).fetchall()
    limits = {"personal": user_limit, "group": chat_limit}
    return [(str(key), int(n), limits[kind_of_key(str(key))]) for key, n in rows]


#: Content about health or safety (LIKE patterns, case-insensitive for ASCII).
CRITICAL_PATTERNS = (
    "%allerg%", "%anaphyla%", "%epipen%", "%medication%", "%medicine%", "%medical%", "%diabet%",
    "%epilep%", "%asthma%", "%blood type%", "%emergency%", "%pregnan%", "%intoleran%", "%coeliac%",
    "%celiac%", "%insulin%", "%seizure%", "%heart condition%",
)  # fmt: skip

#: How much a memory is worth keeping (higher is kept longer): see the module docstring.
STRENGTH = f"""(
    CASE memory_type WHEN 'identity' THEN 3.0 WHEN 'relationship' THEN 2.5 WHEN 'preference' THEN 2.0
        WHEN 'event' THEN 1.0 WHEN 'task' THEN 1.0 WHEN 'context' THEN 0.5 WHEN 'observation' THEN 0.5
        ELSE 1.5 END
    + 2.0 * ({" OR ".join("content LIKE '" + pattern + "'" for pattern in CRITICAL_PATTERNS)})
    + 1.0 * (source_username IS NOT NULL AND subjects = '[]')
    + 2.0 * access_count / (access_count + 3.0)
    + 1.5 / (1.0 + max(0, :now - max(created_at_ms, coalesce(last_access_ms, 0))) / (30.0 * {DAY_MS}))
    + 1.0 * (created_at_ms >= :protect_since)
    + confidence
)"""

#: Strength is computed for this many of a scope's oldest memories (or four times the count
#: to evict, if more): an add at the cap costs a bounded read, not a sort of the whole scope
#: (measured: 77 ms per add at a cap of 10k when every memory was ranked).  A memory outside
#: that pool is younger than all of it, so its recency term would outrank theirs anyway.
STRENGTH_POOL = 256

_LIVE_UNPINNED = "deleted_at_ms IS NULL AND pinned = 0 AND memory_type IS NOT 'episode'"


def eviction_candidates(
    db: apsw.Connection, scope_key: str, count: int, now_ms: int, protect_since_ms: int
) -> list[tuple[int, str, bool, bool]]:
    """The ``count`` memories of a scope to evict first: (rowid, id, expired, recent).

    Superseded ones first, then expired ones, then the weakest (``STRENGTH``) of the scope's
    ``STRENGTH_POOL`` oldest; never a pinned memory or an episode."""
    chosen: dict[int, tuple[int, str, bool, bool]] = {}

    def take(rows: Any) -> None:
        for rowid, id_, expired, recent in rows:
            if len(chosen) < count:
                chosen.setdefault(int(rowid), (int(rowid), str(id_), bool(expired), bool(recent)))

    flags = "(expires_at_ms IS NOT NULL AND expires_at_ms <= :now), (created_at_ms >= :protect_since)"
    params = {"now": now_ms, "protect_since": protect_since_ms, "key": scope_key, "count": count}
    take(db.execute(
        f"SELECT rowid, id, {flags} FROM memories INDEXED BY memories_scope_superseded "
        f"WHERE scope_key = :key AND superseded_by IS NOT NULL AND {_LIVE_UNPINNED} "
        "ORDER BY created_at_ms, id LIMIT :count",
        params,
    ))  # fmt: skip
    if len(chosen) < count:
        take(db.execute(
            f"SELECT rowid, id, {flags} FROM memories INDEXED BY memories_gc_expired "
            f"WHERE expires_at_ms <= :now AND scope_key = :key AND {_LIVE_UNPINNED} "
            "ORDER BY expires_at_ms, id LIMIT :count",
            params,
        ))  # fmt: skip
    if len(chosen) < count:
        pool = max(STRENGTH_POOL, 4 * count)
        take(db.execute(
            f"""
            SELECT rowid, id, {flags} FROM (
                SELECT * FROM memories INDEXED BY memories_scope_time
                WHERE scope_key = :key AND deleted_at_ms IS NULL AND pinned = 0 AND memory_type IS NOT 'episode'
                ORDER BY created_at_ms, rowid LIMIT :pool)
            ORDER BY {STRENGTH} ASC, created_at_ms ASC, rowid ASC
            LIMIT :count + :taken
            """,
            {**params, "pool": pool, "taken": len(chosen)},
        ))  # fmt: skip
    return list(chosen.values())


def evict_batch(
    db: apsw.Connection, scope_key: str, limit: int, now_ms: int, protect_since_ms: int, batch: int = BATCH
) -> int:
    """Soft-delete up to ``batch`` memories of an over-full scope; returns how many."""
    live = counted(db, scope_key)
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


def counted(db: apsw.Connection, scope_key: str) -> int:
    """The memories of a scope that count towards its cap (not deleted, not episodes): two
    index-only counts (the scope's live rows, less its episodes)."""
    (live,) = one(
        db,
        "SELECT count(*) FROM memories INDEXED BY memories_scope_id WHERE scope_key = ? AND deleted_at_ms IS NULL",
        (scope_key,),
    )
    (episodes,) = one(
        db,
        "SELECT count(*) FROM memories INDEXED BY memories_scope_episodes "
        "WHERE scope_key = ? AND memory_type = 'episode' AND deleted_at_ms IS NULL",
        (scope_key,),
    )
    return int(live) - int(episodes)


#: ``meta`` key of the caps the daemon was configured with (so every add holds them).
CAPS_KEY = "max_entries"


def store_caps(db: apsw.Connection, per_user: int, per_chat: int, protect_recent_ms: int) -> None:
    """Record the configured caps in the store: adds read them in their own transaction."""
    if per_user or per_chat:
        meta.put(db, CAPS_KEY, f"{per_user} {per_chat} {protect_recent_ms}")
    else:
        meta.remove(db, CAPS_KEY)


def hold_cap(db: apsw.Connection, scope_key: str, now_ms: int) -> int:
    """After an add: evict what takes ``scope_key`` past its cap, in the add's transaction."""
    caps = meta.get(db, CAPS_KEY)
    if caps is None:
        return 0
    per_user, per_chat, protect_recent_ms = (int(part) for part in caps.split())
    limit = per_user if kind_of_key(scope_key) == "personal" else per_chat
    if not limit:
        return 0
    return evict_batch(db, scope_key, limit, now_ms, now_ms - protect_recent_ms)


def add_within_cap(db: apsw.Connection, new: NewMemory, now_ms: int) -> tuple[MemoryRecord, bool]:
    """``memories.add``, then ``hold_cap``, in one transaction."""
    record, deduplicated = memories.add(db, new, now_ms)
    if not deduplicated:
        hold_cap(db, new.scope_key, now_ms)
    return record, deduplicated
