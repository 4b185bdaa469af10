"""The lifecycle of stored memories: expiry marking, gc past retention, max_entries eviction.

Each step works in bounded batches, one short write transaction per batch, so the daemon's
adds never wait long behind it (and `memoryd gc` from another process never trips their busy
timeout).  The steps are idempotent: the daemon's maintenance task and `memoryd gc` may run
them concurrently.

Eviction order within an over-full scope (first evicted first):

1. expired memories;
2. memories older than ``protect_recent`` before anything added recently (recent ones only
   when nothing else is left);
3. least recently *used*: the day of the last retrieval, or of creation when never
   retrieved (so "oldest" and "least recently retrieved" are one key);
4. lowest confidence (within the same day);
5. oldest, then id (deterministic).

Audit: 'expired' (once per memory), 'evicted', 'purged'.  A purged memory's events are
pruned one retention period after its 'purged' event, so the audit table does not grow forever.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import apsw
import msgspec

from memoryd.ids import iso_from_ms
from memoryd.store import memories, vectors
from memoryd.store.db import Database, one

DAY_MS = 86_400_000
#: Rows per write transaction.
BATCH = 500
#: FTS5 pages merged per optimize step (one write transaction each).
MERGE_PAGES = 1000
#: The actor of events written by the lifecycle.
ACTOR = "memoryd"
META_LAST_MAINTENANCE = "maintenance_last"

#: What max_entries = 0 ("unlimited") means in SQL.
_UNLIMITED = 1 << 62


@dataclass
class GcReport:
    """What gc removed (or, in a dry run, would remove)."""

    dry_run: bool
    cutoff_ms: int
    purged_deleted: int = 0
    purged_expired: int = 0
    events_pruned: int = 0
    optimize_steps: int = 0
    seconds: float = 0.0

    @property
    def purged(self) -> int:
        return self.purged_deleted + self.purged_expired

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["cutoff"] = iso_from_ms(self.cutoff_ms)
        data["purged"] = self.purged
        return data


@dataclass
class EvictionReport:
    evicted: int = 0
    #: scope_key -> (count before, limit)
    scopes: dict[str, tuple[int, int]] = field(default_factory=dict)


# -- expiry -------------------------------------------------------------------------------------


def mark_expired_batch(db: apsw.Connection, now_ms: int, limit: int = BATCH) -> int:
    """Audit 'expired' once for memories whose expiry passed; returns how many were marked.

    Expired memories stay listable (include_expired) until gc; their pending embed jobs go.
    """
    rows: list[tuple[Any, ...]] = db.execute(
        "SELECT rowid, id, expires_at_ms FROM memories INDEXED BY memories_gc_expired "
        "WHERE expires_at_ms <= ? AND deleted_at_ms IS NULL AND expiry_recorded_ms IS NULL LIMIT ?",
        (now_ms, limit),
    ).fetchall()
    for rowid, memory_id, expires_at_ms in rows:
        db.execute("UPDATE memories SET expiry_recorded_ms = ? WHERE rowid = ?", (now_ms, rowid))
        db.execute("DELETE FROM jobs WHERE memory_rowid = ?", (rowid,))
        memories.audit(db, str(memory_id), "expired", ACTOR, now_ms, {"expires_at": iso_from_ms(int(expires_at_ms))})
    return len(rows)


def mark_expired(database: Database, now_ms: int) -> int:
    total = 0
    while (marked := database.write_sync(mark_expired_batch, now_ms)) > 0:
        total += marked
        if marked < BATCH:
            break
    return total


# -- gc -----------------------------------------------------------------------------------------


def purge_counts(db: apsw.Connection, cutoff_ms: int) -> tuple[int, int]:
    """(deleted, expired) memories gc would remove at ``cutoff_ms``."""
    (deleted,) = one(
        db, "SELECT count(*) FROM memories INDEXED BY memories_gc_deleted WHERE deleted_at_ms <= ?", (cutoff_ms,)
    )
    (expired,) = one(
        db,
        "SELECT count(*) FROM memories INDEXED BY memories_gc_expired "
        "WHERE expires_at_ms <= ?1 AND (deleted_at_ms IS NULL OR deleted_at_ms > ?1)",
        (cutoff_ms,),
    )
    return int(deleted), int(expired)


def purge_batch(db: apsw.Connection, cutoff_ms: int, now_ms: int, limit: int = BATCH) -> tuple[int, int]:
    """Hard-remove up to ``limit`` memories deleted or expired before ``cutoff_ms``.

    Returns (deleted, expired) counts removed.  The row, its FTS entry (trigger), vector and
    jobs go; an audit 'purged' event records it.
    """
    doomed: dict[int, tuple[str, str]] = {}
    for rowid, memory_id in db.execute(
        "SELECT rowid, id FROM memories INDEXED BY memories_gc_deleted WHERE deleted_at_ms <= ? LIMIT ?",
        (cutoff_ms, limit),
    ):
        doomed[rowid] = (memory_id, "deleted")
    if len(doomed) < limit:
        for rowid, memory_id in db.execute(
            "SELECT rowid, id FROM memories INDEXED BY memories_gc_expired WHERE expires_at_ms <= ? LIMIT ?",
            (cutoff_ms, limit - len(doomed)),
        ):
            doomed.setdefault(rowid, (memory_id, "expired"))
    if not doomed:
        return 0, 0
    space = vectors.read_space(db)
    rowids = [(rowid,) for rowid in doomed]
    if space is not None:
        db.executemany(f"DELETE FROM {space.table} WHERE memory_rowid = ?", rowids)
    db.executemany("DELETE FROM jobs WHERE memory_rowid = ?", rowids)
    db.executemany("DELETE FROM memories WHERE rowid = ?", rowids)
    detail = {"deleted": '{"reason":"deleted"}', "expired": '{"reason":"expired"}'}
    db.executemany(
        "INSERT INTO events (memory_id, event, actor, at_ms, detail) VALUES (?, 'purged', ?, ?, ?)",
        [(memory_id, ACTOR, now_ms, detail[reason]) for memory_id, reason in doomed.values()],
    )
    reasons = [reason for _, reason in doomed.values()]
    return reasons.count("deleted"), reasons.count("expired")


def prune_events(db: apsw.Connection, cutoff_ms: int) -> int:
    """Remove the whole audit trail of memories purged before ``cutoff_ms``: a memory's events
    outlive its row by one retention period."""
    before: int = db.total_changes()
    db.execute(
        f"DELETE FROM events WHERE memory_id IN ({_PURGED_BEFORE}) "
        "AND NOT EXISTS (SELECT 1 FROM memories WHERE memories.id = events.memory_id)",
        (cutoff_ms,),
    )
    return int(db.total_changes() - before)


def count_prunable_events(db: apsw.Connection, cutoff_ms: int) -> int:
    (count,) = one(
        db,
        f"SELECT count(*) FROM events WHERE memory_id IN ({_PURGED_BEFORE}) "
        "AND NOT EXISTS (SELECT 1 FROM memories WHERE memories.id = events.memory_id)",
        (cutoff_ms,),
    )
    return int(count)


_PURGED_BEFORE = "SELECT memory_id FROM events INDEXED BY events_purged WHERE event = 'purged' AND at_ms < ?"


def gc(database: Database, *, retention_ms: int, now_ms: int, dry_run: bool = False) -> GcReport:
    """Purge memories deleted or expired more than ``retention_ms`` ago, then prune their old
    events.  Optimizing and checkpointing are separate steps (``optimize``, ``Store.checkpoint``)."""
    started = time.perf_counter()
    report = GcReport(dry_run=dry_run, cutoff_ms=now_ms - retention_ms)
    if dry_run:
        report.purged_deleted, report.purged_expired = database.read_sync(purge_counts, report.cutoff_ms)
        report.events_pruned = database.read_sync(count_prunable_events, report.cutoff_ms)
    else:
        while True:
            deleted, expired = database.write_sync(purge_batch, report.cutoff_ms, now_ms)
            report.purged_deleted += deleted
            report.purged_expired += expired
            if deleted + expired < BATCH:
                break
        report.events_pruned = database.write_sync(prune_events, report.cutoff_ms)
    report.seconds = time.perf_counter() - started
    return report


# -- max_entries --------------------------------------------------------------------------------


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
        HAVING n > CASE WHEN scope_key GLOB 'u:*' THEN ?1 ELSE ?2 END
        """,
        (user_limit, chat_limit),
    ).fetchall()
    return [(str(key), int(n), user_limit if str(key).startswith("u:") else chat_limit) for key, n in rows]


#: The eviction order, first evicted first (see the module docstring).
EVICTION_ORDER = """
    (expires_at_ms IS NOT NULL AND expires_at_ms <= :now) DESC,
    (created_at_ms >= :protect_since) ASC,
    max(created_at_ms, coalesce(last_access_ms, 0)) / 86400000 ASC,
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
    scope = "personal" if scope_key.startswith("u:") else "group"
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


def enforce_max_entries(
    database: Database, *, per_user: int, per_chat: int, protect_recent_ms: int, now_ms: int
) -> EvictionReport:
    report = EvictionReport()
    if not per_user and not per_chat:
        return report
    for scope_key, count, limit in database.read_sync(over_limit, per_user, per_chat):
        report.scopes[scope_key] = (count, limit)
        while (evicted := database.write_sync(evict_batch, scope_key, limit, now_ms, now_ms - protect_recent_ms)) > 0:
            report.evicted += evicted
    return report


# -- optimize -----------------------------------------------------------------------------------


def fts_merge_step(db: apsw.Connection, pages: int = MERGE_PAGES) -> bool:
    """One incremental step of an FTS5 optimize; False once the index is a single segment.

    (A negative 'merge' makes every segment eligible; FTS5 signals "no work" by changing
    fewer than two rows.)  Small steps keep the write lock short, unlike 'optimize'.
    """
    before: int = db.total_changes()
    db.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('merge', ?)", (-pages,))
    return bool(db.total_changes() - before >= 2)


def optimize(database: Database, *, max_steps: int = 10_000) -> int:
    """Merge the FTS index fully (in small transactions) and refresh planner statistics."""
    steps = 0
    while steps < max_steps and database.write_sync(fts_merge_step):
        steps += 1
    database.plain_sync(lambda db: db.execute("PRAGMA optimize"))
    return steps


# -- bookkeeping --------------------------------------------------------------------------------


def record_maintenance(db: apsw.Connection, summary: dict[str, object]) -> None:
    """Remember the last maintenance run (shown by `memoryd stats`)."""
    db.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (META_LAST_MAINTENANCE, msgspec.json.encode(summary).decode()),
    )


def last_maintenance(db: apsw.Connection) -> dict[str, object] | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (META_LAST_MAINTENANCE,)).fetchone()
    if row is None or row[0] is None:
        return None
    value = msgspec.json.decode(row[0])
    return value if isinstance(value, dict) else None
