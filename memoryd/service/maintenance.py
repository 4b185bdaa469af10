"""The daemon's maintenance task: the memory lifecycle on a timer, and the access-count flusher.

A pass (at start-up, then every ``lifecycle.maintenance_interval`` seconds) audits newly
expired memories, hard-removes what has been deleted or expired for longer than
``retention_days``, prunes observed conversation messages past ``extraction.retention_days``, evicts past ``max_entries_per_user`` / ``max_entries_per_chat``, merges the
FTS index when much was removed, and records a summary that `memoryd stats` shows.  The work
is done by the store's ``Lifecycle`` in short write transactions, in a worker thread.

Separately, every few seconds, the hit counts that search and list gathered in memory are
written in one transaction, so recording access never slows a search.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import trio

from memoryd.config import EpisodesConfig, ExtractionConfig, LifecycleConfig
from memoryd.errors import DiskFull, StoreBusy, StoreCorrupt, StoreUnreachable
from memoryd.ids import DAY_MS, iso_from_ms, now_ms
from memoryd.log import fields
from memoryd.store.interfaces import ConversationStore
from memoryd.store.interfaces import Maintenance as StoreMaintenance

log = logging.getLogger("memoryd.maintenance")

#: How often gathered access counts are written.
ACCESS_FLUSH_SECONDS = 5.0
#: Merge the FTS index after a pass removed at least this many memories.
OPTIMIZE_AFTER_ROWS = 1000


class Maintenance:
    def __init__(
        self,
        lifecycle: StoreMaintenance,
        settings: LifecycleConfig,
        *,
        conversations: ConversationStore | None = None,
        extraction: ExtractionConfig | None = None,
        episodes: EpisodesConfig | None = None,
    ) -> None:
        """``conversations``: observed messages are pruned after ``extraction.retention_days``,
        episodes after ``episodes.retention_days``."""
        self.lifecycle = lifecycle
        self.settings = settings
        self.conversations = conversations
        self.extraction = extraction or ExtractionConfig()
        self.episodes = episodes or EpisodesConfig()
        self.runs = 0
        self.last_summary: dict[str, Any] | None = None
        self._wake = trio.Event()
        self._pass_done = trio.Event()
        #: Told each scope key a pass evicted memories from (their cached summaries go).
        self.on_evicted: list[Callable[[str], None]] = []

    def run_now(self) -> None:
        """Start a pass now instead of at the next interval."""
        self._wake.set()

    async def wait_for_runs(self, count: int) -> dict[str, Any] | None:
        """Wait until ``count`` passes have finished since start-up; the last one's summary
        (None if it failed)."""
        while self.runs < count:
            await self._pass_done.wait()
        return self.last_summary

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._flush_access_forever)
                task_status.started()
                while True:
                    await self.run_once()
                    with trio.move_on_after(self.settings.maintenance_interval):
                        await self._wake.wait()
                    self._wake = trio.Event()
        finally:
            # Shutting down: what search and list counted since the last flush is written now.
            with trio.CancelScope(shield=True):
                await self._flush_access()

    async def run_once(self) -> dict[str, Any] | None:
        """One lifecycle pass; errors are logged, never raised (the daemon keeps serving)."""
        summary: dict[str, Any] | None = None
        try:
            summary, evicted_from = await trio.to_thread.run_sync(self._pass)
            for scope_key in sorted(evicted_from):
                for listener in self.on_evicted:
                    listener(scope_key)
        except (DiskFull, StoreBusy, StoreCorrupt, StoreUnreachable) as exc:
            # The store logged the state change once; a traceback per pass would add nothing.
            log.warning("maintenance.skipped", extra=fields(reason=str(exc)))
        except Exception:
            log.exception("maintenance.failed")
        self.runs += 1
        self.last_summary = summary
        done, self._pass_done = self._pass_done, trio.Event()
        done.set()
        return summary

    def _pass(self) -> tuple[dict[str, Any], set[str]]:
        """The pass's summary, and the scope keys it evicted memories from."""
        settings, lifecycle = self.settings, self.lifecycle
        started = time.perf_counter()
        expired = lifecycle.mark_expired()
        gc = lifecycle.gc(retention_ms=int(settings.retention_days * DAY_MS))
        eviction = lifecycle.enforce_max_entries(
            per_user=settings.max_entries_per_user,
            per_chat=settings.max_entries_per_chat,
            protect_recent_ms=int(settings.protect_recent_days * DAY_MS),
        )
        messages_pruned = episodes_pruned = 0
        if self.conversations is not None:
            messages_pruned = self.conversations.prune(retention_ms=int(self.extraction.retention_days * DAY_MS))
            if self.episodes.retention_days > 0:
                episodes_pruned = self.conversations.prune_episodes(
                    retention_ms=int(self.episodes.retention_days * DAY_MS)
                )
        # Compacting (the engine's index merges and statistics) pays only after many removals;
        # the rest of the housekeeping never waits for readers nor blocks writers.
        housekeeping = lifecycle.maintain(compact=gc.purged + eviction.evicted >= OPTIMIZE_AFTER_ROWS)
        summary: dict[str, Any] = {
            "at": iso_from_ms(now_ms()),
            "expired_marked": expired,
            "purged": gc.purged,
            "events_pruned": gc.events_pruned,
            "evicted": eviction.evicted,
            "over_limit_scopes": len(eviction.scopes),
            "messages_pruned": messages_pruned,
            "episodes_pruned": episodes_pruned,
            "optimize_steps": housekeeping.compact_steps,
            "ms": round((time.perf_counter() - started) * 1000, 1),
        }
        lifecycle.record_maintenance(summary)
        log.info("maintenance.done", extra=fields(**summary))
        return summary, eviction.evicted_from

    async def _flush_access_forever(self) -> None:
        while True:
            await trio.sleep(ACCESS_FLUSH_SECONDS)
            await self._flush_access()

    async def _flush_access(self) -> None:
        try:
            flushed = await self.lifecycle.flush_hits()
        except (DiskFull, StoreCorrupt, StoreUnreachable):
            return  # kept in memory; the store logged the state change once
        except Exception:
            # Kept in memory and retried next time (e.g. an import held the write lock).
            log.warning("maintenance.access_flush_failed", exc_info=True)
            return
        if flushed:
            log.debug("maintenance.access_flushed", extra=fields(memories=flushed))
