"""``interfaces.Maintenance`` on PostgreSQL: the whole store's expiry, gc past retention,
max_entries eviction, housekeeping, hit counts, stats, checks, erasure, export and import.

Long steps run in bounded batches, one short transaction each; the steps are idempotent, so the
maintenance task of every daemon on the database (and ``memoryd gc``) may run them at once.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
import psycopg

from memoryd.errors import StoreUnreachable
from memoryd.store.admin_records import Finding, ImportReport, MemoryLine, PersonLine
from memoryd.store.interfaces.maintenance import MaintenanceReport
from memoryd.store.maintenance_passes import MaintenancePasses
from memoryd.store.postgres import erasure, eviction
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres.admin import consistency, retention, stats, transfer
from memoryd.store.postgres.admin.retention import BATCH
from memoryd.store.postgres.scope_lock import lock_scope
from memoryd.store.postgres.store_part import StorePart

log = logging.getLogger("memoryd.store")
Conn = psycopg.Connection[Any]


def _evict_locked(conn: Conn, scope_key: str, limit: int, now_ms: int, protect_since_ms: int) -> int:
    lock_scope(conn, scope_key)
    return eviction.evict_batch(conn, scope_key, limit, now_ms, protect_since_ms)


class Maintenance(StorePart, MaintenancePasses):
    """``interfaces.Maintenance`` on PostgreSQL."""

    batch = BATCH

    def set_caps(self, *, per_user: int, per_chat: int, protect_recent_ms: int) -> None:
        self._db.run_sync(eviction.store_caps, per_user, per_chat, protect_recent_ms)

    def _expire_batch(self, now_ms: int) -> int:
        return self._db.run_sync(retention.mark_expired_batch, now_ms)

    def _purgeable(self, cutoff_ms: int) -> tuple[Counter[str], int]:
        return (
            self._db.run_sync(retention.purge_counts, cutoff_ms),
            self._db.run_sync(retention.count_prunable_events, cutoff_ms),
        )

    def _purge_batch(self, cutoff_ms: int, now_ms: int) -> Counter[str]:
        return self._db.run_sync(retention.purge_batch, cutoff_ms, now_ms)

    def _prune_events(self, cutoff_ms: int) -> int:
        """Prune, then fold ``memory_counts`` (the purges appended to it) into one row."""
        pruned = self._db.run_sync(retention.prune_events, cutoff_ms)
        self._db.run_sync(retention.fold_counts)
        return pruned

    def _over_limit(self, per_user: int, per_chat: int) -> list[tuple[str, int, int]]:
        return self._db.run_sync(eviction.over_limit, per_user, per_chat)

    def _evict_batch(self, scope_key: str, limit: int, now_ms: int, protect_since_ms: int) -> int:
        return self._db.run_sync(_evict_locked, scope_key, limit, now_ms, protect_since_ms)

    def erase_user(
        self,
        user_id: str,
        *,
        actor: str,
        include_group: bool = False,
        usernames: Sequence[str] = (),
        dry_run: bool = False,
    ) -> dict[str, int]:
        """``erasure.erase_user`` in one transaction, then (unless ``dry_run``) a VACUUM of the
        touched tables so the erased rows' dead versions do not wait for autovacuum."""
        counts = self._db.run_sync(
            functools.partial(
                erasure.erase_user,
                user_id=user_id,
                now_ms=self._clock(),
                actor=actor,
                include_group=include_group,
                usernames=list(usernames),
                dry_run=dry_run,
            )
        )
        if not dry_run:
            self._store.write_count += 1
            try:
                with self._db.connect(autocommit=True) as conn:
                    erasure.vacuum(conn)
            except psycopg.Error as error:  # the erasure is committed; autovacuum reclaims later
                log.warning("store: VACUUM after an erasure failed: %s", type(error).__name__)
        return counts

    def maintain(self, *, compact: bool = False, release_space: bool = False) -> MaintenanceReport:
        """PostgreSQL's autovacuum does the routine work; ``compact`` refreshes the planner's
        statistics of memoryd's tables, with ``release_space`` (`memoryd gc`) it vacuums them
        too (never VACUUM FULL, which would lock out every daemon).  ``release_space`` alone (a
        daemon stopping) does nothing: the server keeps its own log, and one daemon of several
        stopping is no reason to vacuum the database they share."""
        if not compact:
            return MaintenanceReport()
        statement = "VACUUM (ANALYZE)" if release_space else "ANALYZE"
        tables = (
            "memories",
            "memory_vectors",
            "jobs",
            "people",
            "memory_people",
            "observed_messages",
            "extraction_jobs",
        )
        try:
            with self._db.connect(autocommit=True) as conn:
                # A big table's VACUUM outlasts statement_timeout (meant for the calls); it holds
                # no lock a daemon waits for.
                conn.execute("SET statement_timeout = 0")
                for table in tables:
                    conn.execute(f"{statement} {table}")  # our own names
        except psycopg.OperationalError as exc:
            raise StoreUnreachable("postgres", type(exc).__name__) from None
        done = "vacuumed and analyzed" if release_space else "analyzed"
        return MaintenanceReport(compact_steps=len(tables) if compact else 0, done=f"{len(tables)} tables {done}")

    def record_maintenance(self, summary: dict[str, object]) -> None:
        value = msgspec.json.encode(summary).decode()
        self._db.run_sync(
            lambda conn: conn.execute(
                "INSERT INTO meta (key, value) VALUES ('maintenance_last', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (value,),
            )
        )

    async def flush_hits(self) -> int:
        entries = self._store.hits.drain()
        if entries:
            try:
                await self._db.run(rows.write_hits, entries)
            except BaseException:
                self._store.hits.restore(entries)
                raise
        return len(entries)

    def stats(self) -> dict[str, Any]:
        return self._db.run_sync(stats.collect, self._clock())

    def check(self) -> list[Finding]:
        return self._db.run_sync(consistency.check, self._clock())

    def mark_damaged(self, detail: str) -> None:
        """A check outside the store found damage; PostgreSQL guards its own data, so this only
        records it in the log."""
        log.error("store: damage reported: %s", detail)

    def repair(self, findings: list[Finding]) -> list[str]:
        return self._db.run_sync(consistency.repair, findings, self._clock())

    def export(self, write: Callable[[bytes], object], *, user: str | None) -> int:
        def run(conn: Conn) -> int:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return transfer.export(conn, write, user, self._clock())

        return self._db.run_sync(run)

    def import_memories(
        self, lines: Iterable[MemoryLine | PersonLine], *, max_people: int | None = None
    ) -> ImportReport:
        return self._db.run_sync(transfer.import_lines, list(lines), self._clock(), max_people)
