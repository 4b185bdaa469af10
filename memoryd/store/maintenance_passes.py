"""The maintenance passes every engine runs the same way: expiry marking, gc past retention and
max_entries eviction (``interfaces.Maintenance``).

Each pass works in bounded batches, one short transaction each, until a batch comes back short,
so adds never wait long behind it; the steps are idempotent, so the daemon's maintenance task and
`memoryd gc` (any process on the store) may run them at once.  An engine supplies the steps, each
in its own transaction; the loops and the reports are here once.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable

from memoryd.store.admin_records import EvictionReport, GcReport


class MaintenancePasses(ABC):
    """``mark_expired``, ``gc`` and ``enforce_max_entries`` over the engine's one-transaction steps."""

    #: The most rows a step handles (a shorter batch means the pass is done).
    batch: int
    _clock: Callable[[], int]

    def mark_expired(self) -> int:
        """Audit 'expired' once for every memory whose expiry passed; how many."""
        now_ms, total = self._clock(), 0
        while (marked := self._expire_batch(now_ms)) > 0:
            total += marked
            if marked < self.batch:
                break
        return total

    def gc(self, *, retention_ms: int, dry_run: bool = False) -> GcReport:
        """Purge memories deleted, expired or superseded more than ``retention_ms`` ago, then
        prune their old events (``dry_run``: count them only)."""
        started = time.perf_counter()
        now_ms = self._clock()
        report = GcReport(dry_run=dry_run, cutoff_ms=now_ms - retention_ms)
        if dry_run:
            report.purged_by_reason, report.events_pruned = self._purgeable(report.cutoff_ms)
        else:
            while True:
                batch = self._purge_batch(report.cutoff_ms, now_ms)
                report.purged_by_reason.update(batch)
                if batch.total() < self.batch:
                    break
            report.events_pruned = self._prune_events(report.cutoff_ms)
        report.seconds = time.perf_counter() - started
        return report

    def enforce_max_entries(
        self, *, per_user: int, per_chat: int, protect_recent_ms: int, dry_run: bool = False
    ) -> EvictionReport:
        """Evict (soft-delete, audited) the weakest memories of over-full scopes, and record the
        caps so that every add holds them from now on (``dry_run``: neither)."""
        report = EvictionReport()
        if not dry_run:
            self.set_caps(per_user=per_user, per_chat=per_chat, protect_recent_ms=protect_recent_ms)
        if not per_user and not per_chat:
            return report
        now_ms = self._clock()
        protect_since_ms = now_ms - protect_recent_ms
        for scope_key, count, limit in self._over_limit(per_user, per_chat):
            report.scopes[scope_key] = (count, limit)
            while not dry_run and (evicted := self._evict_batch(scope_key, limit, now_ms, protect_since_ms)):
                report.evicted += evicted
                report.evicted_from.add(scope_key)
        return report

    @abstractmethod
    def set_caps(self, *, per_user: int, per_chat: int, protect_recent_ms: int) -> None:
        """The max_entries caps (0: none) every add holds from now on, in its own transaction."""

    # -- the engine's steps, one transaction each ------------------------------------------------

    @abstractmethod
    def _expire_batch(self, now_ms: int) -> int:
        """Record 'expired' for up to ``batch`` memories whose expiry passed; how many."""

    @abstractmethod
    def _purgeable(self, cutoff_ms: int) -> tuple[Counter[str], int]:
        """What gc would purge before ``cutoff_ms``, by reason, and the events it would prune."""

    @abstractmethod
    def _purge_batch(self, cutoff_ms: int, now_ms: int) -> Counter[str]:
        """Purge up to ``batch`` memories past retention; how many, by reason."""

    @abstractmethod
    def _prune_events(self, cutoff_ms: int) -> int:
        """Prune the events of memories purged before ``cutoff_ms``; how many."""

    @abstractmethod
    def _over_limit(self, per_user: int, per_chat: int) -> list[tuple[str, int, int]]:
        """Scopes holding more counted memories than allowed: (scope_key, count, limit)."""

    @abstractmethod
    def _evict_batch(self, scope_key: str, limit: int, now_ms: int, protect_since_ms: int) -> int:
        """Evict up to ``batch`` memories of an over-full scope; how many."""
