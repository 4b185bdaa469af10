"""Retention: expiry marking, and gc (hard removal) past the retention period.

Each function is one bounded batch in the caller's write transaction (``Lifecycle`` loops),
so the daemon's adds never wait long behind it.  A purged memory's events are pruned one
retention period after its 'purged' event, so the audit table does not grow forever.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import apsw

from memoryd.ids import iso_from_ms
from memoryd.store import jobs, memories
from memoryd.store.db import one, rows_changed

#: Rows per write transaction.
BATCH = 500
#: The actor of events written by the lifecycle.
ACTOR = "memoryd"


@dataclass
class GcReport:
    """What gc removed (or, in a dry run, would remove)."""

    dry_run: bool
    cutoff_ms: int
    purged_deleted: int = 0
    purged_expired: int = 0
    purged_superseded: int = 0
    events_pruned: int = 0
    optimize_steps: int = 0
    seconds: float = 0.0

    @property
    def purged(self) -> int:
        return self.purged_deleted + self.purged_expired + self.purged_superseded

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["cutoff"] = iso_from_ms(self.cutoff_ms)
        data["purged"] = self.purged
        return data


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


def purge_counts(db: apsw.Connection, cutoff_ms: int) -> tuple[int, int, int]:
    """(deleted, expired, superseded) memories gc would remove at ``cutoff_ms``."""
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
    return int(deleted), int(expired), int(superseded)


def purge_batch(db: apsw.Connection, cutoff_ms: int, now_ms: int, limit: int = BATCH) -> tuple[int, int, int]:
    """Hard-remove up to ``limit`` memories deleted, expired or superseded before ``cutoff_ms``.

    Returns (deleted, expired, superseded) counts removed.  The row, its FTS entry (trigger), vector and
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
        return 0, 0, 0
    memories.drop_derived(db, list(doomed))
    db.executemany("DELETE FROM memories WHERE rowid = ?", [(rowid,) for rowid in doomed])
    for memory_id, reason in doomed.values():
        memories.audit(db, memory_id, "purged", ACTOR, now_ms, {"reason": reason})
    reasons = [reason for _, reason in doomed.values()]
    return reasons.count("deleted"), reasons.count("expired"), reasons.count("superseded")


def prune_events(db: apsw.Connection, cutoff_ms: int) -> int:
    """Remove the whole audit trail of memories purged before ``cutoff_ms``: a memory's events
    outlive its row by one retention period."""
    return rows_changed(
        db,
        f"DELETE FROM events WHERE memory_id IN ({_PURGED_BEFORE}) "
        "AND NOT EXISTS (SELECT 1 FROM memories WHERE memories.id = events.memory_id)",
        (cutoff_ms,),
    )


def count_prunable_events(db: apsw.Connection, cutoff_ms: int) -> int:
    (count,) = one(
        db,
        f"SELECT count(*) FROM events WHERE memory_id IN ({_PURGED_BEFORE}) "
        "AND NOT EXISTS (SELECT 1 FROM memories WHERE memories.id = events.memory_id)",
        (cutoff_ms,),
    )
    return int(count)


_PURGED_BEFORE = "SELECT memory_id FROM events INDEXED BY events_purged WHERE event = 'purged' AND at_ms < ?"
