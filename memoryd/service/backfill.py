"""The embedding backfill worker: embeds stored memories from the durable job table.

``memory.add`` stores first and embeds after, so an add never fails because the embedder is
down or slow.  Jobs survive restarts (they are rows), failures back off in the store, and
adds that arrive together are embedded in one backend call because the worker takes every
due job at once.
"""

from __future__ import annotations

import logging
from collections import deque

import trio

from memoryd.embed import Embedder
from memoryd.errors import EmbedderError, EmbeddingModelMismatch
from memoryd.log import fields
from memoryd.service.wakeup import Wakeup
from memoryd.store import Store

log = logging.getLogger("memoryd.backfill")

PROBE_TEXT = "dimension probe"


class EmbeddingBackfill:
    def __init__(self, store: Store, embedder: Embedder, *, batch_size: int) -> None:
        self.store = store
        self.embedder = embedder
        self.batch_size = batch_size
        self.vector_space_ready = False
        self.last_error: str | None = None
        self.embedded_total = 0
        self._wakeup = Wakeup()
        self._waiters: dict[str, trio.Event] = {}
        # Ids embedded lately: an add that registers after its job already finished still learns it.
        self._recent: deque[str] = deque(maxlen=4096)
        self._recent_set: set[str] = set()

    def notify(self) -> None:
        self._wakeup.notify()

    async def wait_embedded(self, memory_id: str, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for ``memory_id`` to be embedded."""
        if memory_id in self._recent_set:
            return True
        event = self._waiters.setdefault(memory_id, trio.Event())
        self.notify()
        with trio.move_on_after(timeout):
            await event.wait()
        self._waiters.pop(memory_id, None)
        return event.is_set() or memory_id in self._recent_set

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await self._establish_vector_space()
        while True:
            self._wakeup.arm()
            jobs = await self.store.jobs.claim_embed(self.batch_size)
            if not jobs:
                await self._sleep_until_due()
                continue
            try:
                vectors = await self.embedder.embed([job.content for job in jobs])
            except EmbedderError as exc:
                self.last_error = str(exc)
                log.warning("backfill.embed_failed", extra=fields(jobs=len(jobs), error=str(exc)))
                await self.store.jobs.fail(jobs, str(exc))
                continue
            self.last_error = None
            try:
                await self.store.jobs.complete_embed(list(zip(jobs, vectors, strict=True)))
            except EmbeddingModelMismatch as exc:
                # The backend changed its dimension under us: never mix vector spaces.
                self.last_error = str(exc)
                log.error("backfill.dimension_changed", extra=fields(error=str(exc)))
                await self.store.jobs.fail(jobs, str(exc))
                continue
            self.embedded_total += len(jobs)
            for job in jobs:
                self._remember(job.memory_id)
            log.debug("backfill.embedded", extra=fields(jobs=len(jobs)))

    async def _establish_vector_space(self) -> None:
        """Learn the embedder's dimension (HTTP backends may be down at start) and set up the store."""
        delay = 1.0
        while self.embedder.dim is None:
            try:
                await self.embedder.embed([PROBE_TEXT])
            except EmbedderError as exc:
                self.last_error = str(exc)
                log.warning("backfill.probe_failed", extra=fields(error=str(exc), retry_in=delay))
                await trio.sleep(delay)
                delay = min(delay * 2, 300.0)
        model_id, dim = self.embedder.model_id, self.embedder.dim
        assert model_id is not None
        try:
            await trio.to_thread.run_sync(self.store.configure_vector_space, model_id, dim)
        except EmbeddingModelMismatch as exc:
            # Only reachable when the dimension was learned late (HTTP); keyword search goes on.
            self.last_error = str(exc)
            log.error("backfill.model_mismatch", extra=fields(error=str(exc)))
            await trio.sleep_forever()
        queued = await trio.to_thread.run_sync(self.store.jobs.enqueue_missing_embeddings)
        self.vector_space_ready = True
        if queued:
            log.info("backfill.queued", extra=fields(jobs=queued))

    async def _sleep_until_due(self) -> None:
        # Jobs made by another process (`memoryd import`) are found by the idle poll.
        await self._wakeup.sleep(await self.store.jobs.next_due_ms())

    def _remember(self, memory_id: str) -> None:
        if len(self._recent) == self._recent.maxlen:
            self._recent_set.discard(self._recent[0])
        self._recent.append(memory_id)
        self._recent_set.add(memory_id)
        event = self._waiters.get(memory_id)
        if event is not None:
            event.set()
