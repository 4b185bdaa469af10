"""max_entries eviction on PostgreSQL: the SQLite engine's order, in PostgreSQL's SQL.

The cap holds at all times: an add that takes a scope past it evicts in its own transaction
(``hold_cap``, under the scope's advisory lock), and maintenance evicts whatever a lowered cap
left over.  Pinned memories are never evicted, and episodes are not counted (they have a
retention of their own).

Within an over-full scope, first evicted first: superseded memories, then expired ones, then
the lowest ``STRENGTH`` among the scope's ``STRENGTH_POOL`` oldest, then the oldest, then id.
Strength adds up the type (identity 3 ... observation 0.5), +2 for health or safety content,
+1 for a first-hand statement, up to +2 for use, up to +1.5 for recency (halving 30 days after
it was last found or added), +1 while younger than ``protect_recent_days``, and its confidence.
Evicted memories are soft-deleted and audited 'evicted'; gc removes them later.
"""

from __future__ import annotations

from typing import Any

import psycopg

from memoryd.ids import DAY_MS
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres import notices
from memoryd.store.visibility import PERSONAL_PREFIX, kind_of_key

Conn = psycopg.Connection[Any]

#: Evictions per transaction (maintenance loops until the scope fits).
BATCH = 500
ACTOR = "memoryd"
#: What max_entries = 0 ("unlimited") means in SQL.
_UNLIMITED = 1 << 62
#: ``meta`` key of the caps the daemon was configured with (so every add holds them).
CAPS_KEY = "max_entries"

#: Content about health or safety (substrings, case-insensitive, as the SQLite engine's).
CRITICAL_PATTERNS = (
    "%allerg%", "%anaphyla%", "%epipen%", "%medication%", "%medicine%", "%medical%", "%diabet%",
    "%epilep%", "%asthma%", "%blood type%", "%emergency%", "%pregnan%", "%intoleran%", "%coeliac%",
    "%celiac%", "%insulin%", "%seizure%", "%heart condition%",
)  # fmt: skip

#: The same patterns as one case-insensitive regular expression: one scan of the content, not
#: one per pattern (measured: the pick among 1000 memories went from 2.8 ms to 1.7 ms).
CRITICAL_RE = "|".join(pattern.strip("%") for pattern in CRITICAL_PATTERNS)

#: How much a memory is worth keeping (higher is kept longer): see the module docstring.
STRENGTH = f"""(
    CASE memory_type WHEN 'identity' THEN 3.0 WHEN 'relationship' THEN 2.5 WHEN 'preference' THEN 2.0
        WHEN 'event' THEN 1.0 WHEN 'task' THEN 1.0 WHEN 'context' THEN 0.5 WHEN 'observation' THEN 0.5
        ELSE 1.5 END
    + 2.0 * (content ~* '{CRITICAL_RE}')::int
    + 1.0 * (source_username IS NOT NULL AND subjects = '[]')::int
    + 2.0 * access_count / (access_count + 3.0)
    + 1.5 / (1.0 + greatest(0, %(now)s - greatest(created_at_ms, coalesce(last_access_ms, 0))) / (30.0 * {DAY_MS}))
    + 1.0 * (created_at_ms >= %(protect_since)s)::int
    + confidence
)"""

#: Strength is computed for this many of a scope's oldest memories (or four times the count to
#: evict, if more): an add at the cap costs a bounded read, not a sort of the whole scope.
STRENGTH_POOL = 256

_LIVE_UNPINNED = "deleted_at_ms IS NULL AND NOT pinned AND memory_type IS DISTINCT FROM 'episode'"
_FLAGS = "(expires_at_ms IS NOT NULL AND expires_at_ms <= %(now)s), (created_at_ms >= %(protect_since)s)"


def over_limit(conn: Conn, per_user: int, per_chat: int) -> list[tuple[str, int, int]]:
    """Scopes holding more counted memories than allowed: (scope_key, count, limit)."""
    user_limit, chat_limit = per_user or _UNLIMITED, per_chat or _UNLIMITED
    found = conn.execute(
        "SELECT scope_key, count(*) FROM memories WHERE deleted_at_ms IS NULL "
        "AND memory_type IS DISTINCT FROM 'episode' GROUP BY scope_key "
        "HAVING count(*) > CASE WHEN scope_key LIKE %s THEN %s ELSE %s END",
        (PERSONAL_PREFIX + "%", user_limit, chat_limit),
    ).fetchall()
    limits = {"personal": user_limit, "group": chat_limit}
    return [(str(key), int(n), limits[kind_of_key(str(key))]) for key, n in found]


def counted(conn: Conn, scope_key: str) -> int:
    """The memories of a scope that count towards its cap (not deleted, not episodes)."""
    row = conn.execute(
        "SELECT count(*) FROM memories WHERE scope_key = %s AND deleted_at_ms IS NULL "
        "AND memory_type IS DISTINCT FROM 'episode'",
        (scope_key,),
    ).fetchone()
    return 0 if row is None else int(row[0])


def eviction_candidates(
    conn: Conn, scope_key: str, count: int, now_ms: int, protect_since_ms: int
) -> list[tuple[int, str, bool, bool]]:
    """The ``count`` memories of a scope to evict first: (rowid, id, expired, recent)."""
    chosen: dict[int, tuple[int, str, bool, bool]] = {}

    def take(found: Any) -> None:
        for rowid, id_, expired, recent in found:
            if len(chosen) < count:
                chosen.setdefault(int(rowid), (int(rowid), str(id_), bool(expired), bool(recent)))

    params = {"now": now_ms, "protect_since": protect_since_ms, "key": scope_key, "count": count}
    take(conn.execute(
        f"SELECT rowid, id, {_FLAGS} FROM memories WHERE scope_key = %(key)s AND superseded_by IS NOT NULL "
        f"AND {_LIVE_UNPINNED} ORDER BY created_at_ms, id LIMIT %(count)s",
        params,
    ))  # fmt: skip
    if len(chosen) < count:
        take(conn.execute(
            f"SELECT rowid, id, {_FLAGS} FROM memories WHERE expires_at_ms <= %(now)s AND scope_key = %(key)s "
            f"AND {_LIVE_UNPINNED} ORDER BY expires_at_ms, id LIMIT %(count)s",
            params,
        ))  # fmt: skip
    if len(chosen) < count:
        take(conn.execute(
            f"SELECT rowid, id, {_FLAGS} FROM (SELECT * FROM memories WHERE scope_key = %(key)s AND {_LIVE_UNPINNED} "
            "ORDER BY created_at_ms, rowid LIMIT %(pool)s) AS oldest "
            f"ORDER BY {STRENGTH} ASC, created_at_ms ASC, rowid ASC LIMIT %(wanted)s",
            {**params, "pool": max(STRENGTH_POOL, 4 * count), "wanted": count + len(chosen)},
        ))  # fmt: skip
    return list(chosen.values())


def evict_batch(conn: Conn, scope_key: str, limit: int, now_ms: int, protect_since_ms: int) -> int:
    """Soft-delete up to ``BATCH`` memories of an over-full scope; how many (the caller holds
    the scope's lock)."""
    total = 0
    while (excess := min(counted(conn, scope_key) - limit, BATCH - total)) > 0:
        victims = eviction_candidates(conn, scope_key, excess, now_ms, protect_since_ms)
        evicted = _evict(conn, scope_key, victims, limit, now_ms)
        total += evicted
        if evicted == len(victims):
            break
        # A victim was pinned (or deleted) by another daemon after it was chosen: choose again.
    if total:
        notices.deleted(conn, scope_key)  # every daemon's summaries that may quote them go
    return total


def _evict(conn: Conn, scope_key: str, victims: list[tuple[int, str, bool, bool]], limit: int, now_ms: int) -> int:
    """Soft-delete and audit ``victims``, re-checked as the rows are written: a pin (or a delete)
    another daemon committed since they were read wins (a pin takes no scope lock; the UPDATE
    waits for its row lock, then sees it)."""
    evicted = {
        int(rowid)
        for (rowid,) in conn.execute(
            "UPDATE memories SET deleted_at_ms = %s, updated_at_ms = %s "
            "WHERE rowid = ANY(%s) AND deleted_at_ms IS NULL AND NOT pinned RETURNING rowid",
            (now_ms, now_ms, [rowid for rowid, *_ in victims]),
        )
    }
    rows.drop_derived(conn, sorted(evicted))
    for rowid, memory_id, expired, recent in victims:
        if rowid in evicted:
            rows.audit(conn, scope_key, memory_id, "evicted", ACTOR, now_ms,
                       {"reason": "max_entries", "scope": kind_of_key(scope_key), "limit": limit, "expired": expired, "recent": recent})  # fmt: skip
    return len(evicted)


def store_caps(conn: Conn, per_user: int, per_chat: int, protect_recent_ms: int) -> None:
    """Record the configured caps in the store: adds read them in their own transaction."""
    if per_user or per_chat:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (CAPS_KEY, f"{per_user} {per_chat} {protect_recent_ms}"),
        )
    else:
        conn.execute("DELETE FROM meta WHERE key = %s", (CAPS_KEY,))


def read_caps(conn: Conn) -> psycopg.Cursor[Any]:
    """The configured caps' query, sent (an add sends it with its first reads: ``hold_cap``)."""
    return conn.execute("SELECT value FROM meta WHERE key = %s", (CAPS_KEY,))


def hold_cap(conn: Conn, scope_key: str, now_ms: int, caps: psycopg.Cursor[Any] | None = None) -> int:
    """After an add: evict what takes ``scope_key`` past its cap, in the add's transaction.
    ``caps``: ``read_caps`` sent earlier in this transaction (else it is read now)."""
    row = (caps or read_caps(conn)).fetchone()
    if row is None or row[0] is None:
        return 0
    per_user, per_chat, protect_recent_ms = (int(part) for part in str(row[0]).split())
    limit = per_user if kind_of_key(scope_key) == "personal" else per_chat
    if not limit:
        return 0
    return evict_batch(conn, scope_key, limit, now_ms, now_ms - protect_recent_ms)
