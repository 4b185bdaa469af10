"""``Lifecycle``: what the maintenance task and the admin commands do to the whole store.

Expiry marking, gc past retention (``retention.py``) and max_entries eviction (``eviction.py``),
whose passes ``store/maintenance_passes.py`` runs over the steps here; FTS merging, WAL
checkpoints, hit-count flushes, stats, consistency checks, export and import.

The long steps work in bounded batches, one short write transaction per batch, so the daemon's
adds never wait long behind them (and `memoryd gc` from another process never trips their
busy timeout).  The steps are idempotent: the daemon's maintenance task and `memoryd gc` may
run them concurrently.  Everything but ``flush_hits`` is synchronous: the daemon runs it in a
worker thread, the CLI directly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import apsw

from memoryd.errors import StoreCorrupt
from memoryd.store.interfaces.maintenance import MaintenanceReport
from memoryd.store.maintenance_passes import MaintenancePasses
from memoryd.store.sqlite.admin import consistency, erasure, eviction, retention, stats, transfer
from memoryd.store.sqlite.admin.consistency import Finding
from memoryd.store.sqlite.admin.retention import BATCH
from memoryd.store.sqlite.admin.transfer import ImportReport, MemoryLine
from memoryd.store.sqlite.admin.transfer_people import PersonLine
from memoryd.store.sqlite.db.database import Database, file_sizes, rows_changed
from memoryd.store.sqlite.memories.hits import HitCounter, write_hits

#: FTS5 pages merged per optimize step (one write transaction each).
MERGE_PAGES = 1000
CHECKPOINT_MODES = ("PASSIVE", "FULL", "RESTART", "TRUNCATE")


class Lifecycle(MaintenancePasses):
    batch = BATCH

    def __init__(self, db: Database, hits: HitCounter, clock: Callable[[], int]) -> None:
        self._db = db
        self._hits = hits
        self._clock = clock

    # -- the maintenance pass --------------------------------------------------------------------

    def set_caps(self, *, per_user: int, per_chat: int, protect_recent_ms: int) -> None:
        """The max_entries caps every add holds in its own transaction (0 = no cap)."""
        self._db.write_sync(eviction.store_caps, per_user, per_chat, protect_recent_ms)

    def _expire_batch(self, now_ms: int) -> int:
        return self._db.write_sync(retention.mark_expired_batch, now_ms)

    def _purgeable(self, cutoff_ms: int) -> tuple[Counter[str], int]:
        return (
            self._db.read_sync(retention.purge_counts, cutoff_ms),
            self._db.read_sync(retention.count_prunable_events, cutoff_ms),
        )

    def _purge_batch(self, cutoff_ms: int, now_ms: int) -> Counter[str]:
        return self._db.write_sync(retention.purge_batch, cutoff_ms, now_ms)

    def _prune_events(self, cutoff_ms: int) -> int:
        return self._db.write_sync(retention.prune_events, cutoff_ms)

    def _over_limit(self, per_user: int, per_chat: int) -> list[tuple[str, int, int]]:
        return self._db.read_sync(eviction.over_limit, per_user, per_chat)

    def _evict_batch(self, scope_key: str, limit: int, now_ms: int, protect_since_ms: int) -> int:
        return self._db.write_sync(eviction.evict_batch, scope_key, limit, now_ms, protect_since_ms)

    def erase_user(
        self,
        user_id: str,
        *,
        actor: str,
        include_group: bool = False,
        usernames: Sequence[str] = (),
        dry_run: bool = False,
    ) -> dict[str, int]:
        """Erase everything about ``user_id`` at once (``erasure.erase_user``), then fold and
        empty the WAL, which held the erased rows' old pages; counts per kind."""
        if dry_run:
            return self._db.read_sync(
                erasure.erase_user, user_id, self._clock(), actor=actor, include_group=include_group,
                usernames=usernames, dry_run=True,
            )  # fmt: skip
        counts = self._db.write_sync(
            erasure.erase_user, user_id, self._clock(), actor=actor, include_group=include_group, usernames=usernames
        )
        self._db.plain_sync(erasure.wipe_free_space)
        return counts

    def optimize(self, *, max_steps: int = 10_000) -> int:
        """Merge the FTS index fully (in small transactions) and refresh planner statistics."""
        steps = 0
        while steps < max_steps and self._db.write_sync(_fts_merge_step, MERGE_PAGES):
            steps += 1
        self._db.plain_sync(lambda db: db.execute("PRAGMA optimize"))
        return steps

    def checkpoint(self, mode: str = "TRUNCATE") -> tuple[int, int, int]:
        """Fold the WAL back into the database file (TRUNCATE also empties it).

        Returns SQLite's (busy, wal frames, frames checkpointed); busy = 1 means readers or a
        writer of another process kept it from finishing (it completes on a later checkpoint).
        """
        if mode not in CHECKPOINT_MODES:
            raise ValueError(f"unknown checkpoint mode {mode}")
        row = self._db.plain_sync(lambda db: db.execute(f"PRAGMA wal_checkpoint({mode})").fetchone())
        return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)

    def maintain(self, *, compact: bool = False, release_space: bool = False) -> MaintenanceReport:
        """SQLite's housekeeping: ``compact`` merges the FTS index and refreshes the planner's
        statistics (``optimize``); then a checkpoint folds the WAL into the file, PASSIVE (never
        waits for readers, never blocks writers; SQLite's auto-checkpoint does the rest) or,
        with ``release_space``, TRUNCATE (also empties the WAL file)."""
        steps = self.optimize() if compact else 0
        busy, _, _ = self.checkpoint("TRUNCATE" if release_space else "PASSIVE")
        state = "checkpointed" if busy == 0 else "checkpoint deferred (the daemon was busy; it completes later)"
        return MaintenanceReport(
            compact_steps=steps, complete=busy == 0, done=f"FTS index merged in {steps} steps; WAL {state}"
        )

    def record_maintenance(self, summary: dict[str, object]) -> None:
        """Remember the last maintenance run (shown by `memoryd stats`)."""
        self._db.write_sync(stats.record_maintenance, summary)

    async def flush_hits(self) -> int:
        """Write the hit counts gathered since the last flush in one transaction."""
        entries = self._hits.drain()
        if entries:
            try:
                await self._db.write(write_hits, entries)
            except BaseException:
                self._hits.restore(entries)
                raise
        return len(entries)

    # -- the admin commands ----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """What the store holds (one snapshot), plus the file sizes."""
        data = self._db.read_sync(stats.collect, self._clock())
        sizes = file_sizes(self._db.path)
        data["database"] = {"path": str(self._db.path), **sizes, "bytes": sum(sizes.values())}
        return data

    def check(self, *, fts_sample: int = consistency.FTS_SAMPLE) -> list[Finding]:
        """Integrity and index consistency, in one read snapshot."""
        try:
            return self._db.read_sync(consistency.check, self._clock(), fts_sample=fts_sample)
        except StoreCorrupt as exc:
            # Damaged where even the snapshot could not be read: that is the finding.
            return [Finding("sqlite", False, f"{exc} ({consistency.RESTORE_HINT})", 1)]

    def mark_damaged(self, detail: str) -> None:
        """The start-up integrity check found damage: health turns degraded, writes stop."""
        self._db.condition.corrupt(detail)

    def repair(self, findings: list[Finding]) -> list[str]:
        """Fix what ``check`` found, in one write transaction; returns what was done."""
        return self._db.write_sync(consistency.repair, findings, self._clock())

    def export(self, write: Callable[[bytes], object], *, user: str | None) -> int:
        """Stream the export format through ``write`` from one read snapshot; memories written."""
        return self._db.read_sync(transfer.export_memories, write, user=user, now_ms=self._clock())

    def import_memories(
        self, lines: Iterable[MemoryLine | PersonLine], *, max_people: int | None = None
    ) -> ImportReport:
        """Insert validated lines (memories, then people) whose ids are new, in ONE write
        transaction (all or nothing); a person past ``max_people`` per owner is refused."""
        return self._db.write_sync(transfer.import_memories, lines, self._clock(), max_people=max_people)


def _fts_merge_step(db: apsw.Connection, pages: int) -> bool:
    """One incremental step of an FTS5 optimize; False once the index is a single segment.

    (A negative 'merge' makes every segment eligible; FTS5 signals "no work" by changing
    fewer than two rows.)  Small steps keep the write lock short, unlike 'optimize'.
    """
    return rows_changed(db, "INSERT INTO memories_fts (memories_fts, rank) VALUES ('merge', ?)", (-pages,)) >= 2
