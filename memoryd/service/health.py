"""``system.health``: liveness for anyone, the daemon's numbers for trusted callers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import trio

from memoryd import __version__
from memoryd.errors import StoreError
from memoryd.rpc.dispatch import CallContext
from memoryd.service.backfill import EmbeddingBackfill
from memoryd.service.conversation import ConversationService
from memoryd.service.memory import MemoryService
from memoryd.service.params import HealthParams
from memoryd.store import JobQueue

#: Health's store numbers are reused for this long unless this process wrote meanwhile.
HEALTH_CACHE_SECONDS = 1.0


@dataclass
class HealthReporter:
    """``system.health``: cheap enough to poll; no memory contents.

    Counting memories scans an index (about 13 ms at 100k), and two worker-thread hops cost more
    than the whole RPC; so the store's numbers are cached until the next write or for a second.
    """

    service: MemoryService
    #: None without an embedder.
    backfill: EmbeddingBackfill | None
    #: The server's counters (``RpcServer.stats``), shown under "server".
    server_stats: Callable[[], dict[str, Any]]
    _: KW_ONLY
    jobs: JobQueue
    conversations: ConversationService | None = None
    started: float = field(default_factory=time.monotonic, init=False)
    _store_numbers: tuple[dict[str, Any], dict[str, int], dict[str, Any]] | None = field(default=None, init=False)
    _store_numbers_stamp: tuple[int, float] = field(default=(-1, 0.0), init=False)

    async def health(self, params: HealthParams, ctx: CallContext) -> dict[str, Any]:
        # Never needs a token (liveness probes, `memory health` in a sandbox), so in token mode
        # only trusted peers see the host-wide numbers; everyone else gets liveness only.
        embedder = self.service.embedder
        degraded = embedder is not None and self.backfill is not None and bool(self.backfill.last_error)
        storage = self.service.memories.storage
        degraded = degraded or storage.state != "ok"
        liveness: dict[str, Any] = {
            "status": "degraded" if degraded else "ok",
            "version": __version__,
            "uptime_seconds": round(time.monotonic() - self.started, 3),
        }
        if storage.state != "ok":
            # A full disk or a damaged file: every caller should learn why writes fail.
            liveness["reason"] = storage.reason
        if not self.service.authenticator.sees_health_details(ctx):
            return liveness
        embedder_state: dict[str, Any] = {"backend": "none", "state": "disabled"}
        if embedder is not None:
            embedder_state = dict(embedder.describe())
            if self.backfill is not None:
                embedder_state["vector_space_ready"] = self.backfill.vector_space_ready
                embedder_state["embedded_since_start"] = self.backfill.embedded_total
                # memory.add: embedded before its reply (idle embedder) or left to the backfill.
                embedder_state["adds_embedded_at_once"] = self.backfill.own_total
                embedder_state["adds_left_to_backfill"] = self.backfill.deferred_total
                if self.backfill.last_error:
                    embedder_state["last_error"] = self.backfill.last_error
        try:
            counts, backlog, queue = await self._cached_store_numbers()
        except StoreError:
            # The numbers may sit on damaged pages; health must still answer (the store's
            # condition now says corrupt, and the reason is shown).
            counts, backlog, queue = {}, {}, {}
            storage = self.service.memories.storage
            liveness.update(status="degraded", reason=storage.reason or "the store could not be read")
        extra: dict[str, Any] = {}
        if self.conversations is not None:
            extra["extraction"] = self.conversations.describe(queue)
        extra["secrets"] = self.service.secrets.describe()
        return {
            **liveness,
            "storage": storage.to_dict(),
            "counts": counts,
            "embedder": embedder_state,
            "backlog": backlog,
            "server": self.server_stats(),
            **extra,
        }

    async def _cached_store_numbers(self) -> tuple[dict[str, Any], dict[str, int], dict[str, Any]]:
        memories = self.service.memories
        writes, taken_at = self._store_numbers_stamp
        now = trio.current_time()
        if self._store_numbers is None or writes != memories.write_count or now - taken_at > HEALTH_CACHE_SECONDS:
            stamp = (memories.write_count, now)
            queue = {} if self.conversations is None else await self.conversations.conversations.status()
            self._store_numbers = (await memories.health_counts(), await self.jobs.backlog(), queue)
            self._store_numbers_stamp = stamp
        return self._store_numbers
