"""The method table: every JSON-RPC method memoryd serves, with its params type."""

from __future__ import annotations

import time
from typing import Any, Callable

from memoryd import __version__
from memoryd.rpc.dispatch import CallContext, MethodTable
from memoryd.service.backfill import EmbeddingBackfill
from memoryd.service.memory import MemoryService
from memoryd.service.params import AddParams, DeleteParams, GetParams, HealthParams, ListParams, SearchParams


class HealthReporter:
    """``system.health``: cheap enough to poll; no memory contents."""

    def __init__(
        self,
        service: MemoryService,
        backfill: EmbeddingBackfill | None,
        server_stats: Callable[[], dict[str, Any]],
    ) -> None:
        self.service = service
        self.backfill = backfill
        self.server_stats = server_stats
        self.started = time.monotonic()

    async def health(self, params: HealthParams, ctx: CallContext) -> dict[str, Any]:
        # Never needs a token (liveness probes, `memory health` in a sandbox), so in token mode
        # only trusted peers see the host-wide numbers; everyone else gets liveness only.
        store = self.service.store
        embedder = self.service.embedder
        degraded = embedder is not None and self.backfill is not None and bool(self.backfill.last_error)
        if not self.service.authenticator.sees_health_details(ctx):
            return {
                "status": "degraded" if degraded else "ok",
                "version": __version__,
                "uptime_seconds": round(time.monotonic() - self.started, 3),
            }
        embedder_state: dict[str, Any] = {"backend": "none", "state": "disabled"}
        if embedder is not None:
            embedder_state = dict(embedder.describe())
            if self.backfill is not None:
                embedder_state["vector_space_ready"] = self.backfill.vector_space_ready
                embedder_state["embedded_since_start"] = self.backfill.embedded_total
                if self.backfill.last_error:
                    embedder_state["last_error"] = self.backfill.last_error
        backlog = await store.backlog()
        return {
            "status": "degraded" if degraded else "ok",
            "version": __version__,
            "uptime_seconds": round(time.monotonic() - self.started, 3),
            "counts": await store.health_counts(),
            "embedder": embedder_state,
            "backlog": backlog,
            "server": self.server_stats(),
        }


def build_method_table(service: MemoryService, health: HealthReporter) -> MethodTable:
    table = MethodTable()
    table.register("memory.add", AddParams, service.add)
    table.register("memory.search", SearchParams, service.search)
    table.register("memory.list", ListParams, service.list)
    table.register("memory.get", GetParams, service.get)
    table.register("memory.delete", DeleteParams, service.delete)
    table.register("system.health", HealthParams, health.health)
    return table
