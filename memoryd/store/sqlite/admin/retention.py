"""Retention: expiry marking, and gc (hard removal) past the retention period.

Each function is one bounded batch in the caller's write transaction (``Lifecycle`` loops),
so the daemon's adds never wait long behind it.  A purged memory's events are pruned one
retention period after its 'purged' event, so the audit table does not grow forever.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import apsw

from memoryd.ids import iso_from_ms
from memoryd.store.sqlite.db.database import one, rows_changed
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.memories import memories

#: Rows per write transaction.
BATCH = 500
#: The actor of events written by the lifecycle.
ACTOR = "memoryd"


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
        jobs.drop_jobs_of(db, [rowid])
        memories.audit(db, str(memory_id), "expired", ACTOR, now_ms, {"expires_at": iso_from_ms(int(expires_at_ms))})
    return len(rows)


# -- gc -----------------------------------------------------------------------------------------


def purge_counts(db: apsw.Connection, cutoff_ms: int) -> Counter[str]:
    """The memories gc would remove at ``cutoff_ms``, by reason."""
    (deleted,) = one(
        db, "SELECT count(*) FROM memories INDEXED BY memories_gc_deleted WHERE deleted_at_ms <= ?", (cutoff_ms,)
    )
    (expired,) = one(
        db,
        "SELECT count(*) FROM memories INDEXED BY memories_gc_expired "
        "WHERE expires_at_ms <= ?1 AND (deleted_at_ms IS NULL OR deleted_at_ms > ?1)",
        (cutoff_ms,),
    )
    (superseded,) = one(
        db,
        "SELECT count(*) FROM memories INDEXED BY memories_gc_superseded WHERE superseded_at_ms <= ?1 "
        "AND (deleted_at_ms IS NULL OR deleted_at_ms > ?1) AND (expires_at_ms IS NULL OR expires_at_ms > ?1)",
        (cutoff_ms,),
    )
    return Counter(deleted=int(deleted), expired=int(expired), superseded=int(superseded))


def purge_batch(db: apsw.Connection, cutoff_ms: int, now_ms: int, limit: int = BATCH) -> Counter[str]:
    """Hard-remove up to ``limit`` memories deleted, expired or superseded before ``cutoff_ms``.

    Returns how many were removed, by reason.  The row, its FTS entry (trigger), vector and
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
    if len(doomed) < limit:
        for rowid, memory_id in db.execute(
            "SELECT rowid, id FROM memories INDEXED BY memories_gc_superseded WHERE superseded_at_ms <= ? LIMIT ?",
            (cutoff_ms, limit - len(doomed)),
        ):
            doomed.setdefault(rowid, (memory_id, "superseded"))
    if not doomed:
        return Counter()
    memories.drop_derived(db, list(doomed))
    memories.record_adds(db, list(doomed))
    db.executemany("DELETE FROM memories WHERE rowid = ?", [(rowid,) for rowid in doomed])
    for memory_id, reason in doomed.values():
        memories.audit(db, memory_id, "purged", ACTOR, now_ms, {"reason": reason})
    return Counter(reason for _, reason in doomed.values())


def prune_events(db: apsw.Connection, cutoff_ms: int) -> int:
    """Remove the whole audit trail of memories purged before ``cutoff_ms``: a memory's events
    outlive its row by one retention period."""
    return rows_changed(
        db,
        f"DELETE FROM audit_events WHERE memory_id IN ({_PURGED_BEFORE}) "
        "AND NOT EXISTS (SELECT 1 FROM memories WHERE memories.id = audit_events.memory_id)",
        (cutoff_ms,),
    )


def count_prunable_events(db: apsw.Connection, cutoff_ms: int) -> int:
    (count,) = one(
        db,
        f"SELECT count(*) FROM audit_events WHERE memory_id IN ({_PURGED_BEFORE}) "
        "AND NOT EXISTS (SELECT 1 FROM memories WHERE memories.id = audit_events.memory_id)",
        (cutoff_ms,),
    )
    return int(count)


_PURGED_BEFORE = "SELECT memory_id FROM audit_events INDEXED BY events_purged WHERE event = 'purged' AND at_ms < ?"
