"""The embedding backfill worker: embeds stored memories from the durable job table.

``memory.add`` stores first and embeds after, so an add never fails because the embedder is
down or slow.  Jobs survive restarts (they are rows), failures back off in the store, and
adds that arrive together are embedded in one backend call because the worker takes every
due job at once.

An add that finds the embedder idle embeds its own text at once, alongside its insert
(:meth:`EmbeddingBackfill.store_and_embed`), and answers ``embedded: true``; its job is leased
to it so the worker leaves it alone.  While anything else is being embedded, adds only queue
their job and answer ``embedded: false``: the worker batches them, seconds later at most.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from memoryd.embed import Embedder
from memoryd.embed.vectors import F32
from memoryd.errors import DiskFull, EmbedderError, EmbeddingModelMismatch
from memoryd.log import fields
from memoryd.service.wakeup import Wakeup
from memoryd.store.interfaces import Backend
from memoryd.store.records import EmbedJob
from memoryd.store.supersession_records import Stored

log = logging.getLogger("memoryd.backfill")

PROBE_TEXT = "dimension probe"


class EmbeddingBackfill:
    def __init__(self, store: Backend, embedder: Embedder, *, batch_size: int) -> None:
        self.store = store
        self.embedder = embedder
        self.batch_size = batch_size
        self.vector_space_ready = False
        #: The store had no vector space when this worker started, and has none yet: memories
        #: stored meanwhile get no embed job until the first one exists (every live memory is
        #: then queued), so health counts them as the embed backlog.
        self.awaiting_first_space = False
        self.last_error: str | None = None
        self.embedded_total = 0
        #: Adds that embedded their own text, and those that left it to the worker.
        self.own_total = 0
        self.deferred_total = 0
        self._wakeup = Wakeup()
        # The worker is going through a backlog: from a claim that found jobs until one finds none.
        self._draining = False
        self._own_in_flight = 0
        #: The worker's claim until it is completed or failed: a storage fault that stops a run
        #: in between leaves it leased, and the next run hands it back first.
        self._claimed: list[EmbedJob] = []
        #: Jobs of adds whose vector a full disk refused, leased to the add: handed back too.
        self._hand_back: list[EmbedJob] = []

    def notify(self) -> None:
        self._wakeup.notify()

    @property
    def idle(self) -> bool:
        """Nothing is being embedded (by the worker or an add), and the embedder works."""
        return self.last_error is None and not self._draining and self._own_in_flight == 0

    async def store_and_embed(
        self, content: str, store: Callable[[bool], Awaitable[Stored]], timeout: float
    ) -> tuple[Stored, bool]:
        """Run ``store(embeds_itself)`` and say whether the new memory has its vector.

        Idle: ``content`` is embedded at once, alongside the insert (the job comes back leased
        to this call), and the vector is stored before the answer; should that take more than
        ``timeout`` seconds or fail, the job goes back to the worker.  Busy: the job is queued
        and the worker batches it with the others (False)."""
        if not self.idle:
            stored = await store(False)
            if not stored.deduplicated:
                self.deferred_total += 1
            self.notify()
            return stored, False
        self._own_in_flight += 1
        try:
            return await self._store_and_embed(content, store, timeout)
        finally:
            self._own_in_flight -= 1

    async def _store_and_embed(
        self, content: str, store: Callable[[bool], Awaitable[Stored]], timeout: float
    ) -> tuple[Stored, bool]:
        vectors: list[F32] = []

        async def embed_own() -> None:
            with trio.move_on_after(timeout):
                try:
                    vectors.append((await self.embedder.embed([content]))[0])
                except EmbedderError as exc:
                    # Adds defer to the worker until it embeds again (it clears the error).
                    self.last_error = str(exc)
                    log.warning("backfill.own_embed_failed", extra=fields(error=str(exc)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(embed_own)
            stored = await store(True)
            if stored.embed_job is None:  # a duplicate (or no vector space): nothing to embed
                nursery.cancel_scope.cancel()
        job = stored.embed_job
        if job is None:
            return stored, False
        if vectors:
            try:
                if await self.store.jobs.complete_embed([(job, vectors[0])]):
                    self.own_total += 1
                    self.embedded_total += 1
                    return stored, True
            except DiskFull:
                # The memory is stored, so the add succeeded; the worker hands its job back
                # once it can write again (or its lease lapses first).
                self._hand_back.append(job)
                self.notify()
                return stored, False
            except EmbeddingModelMismatch as exc:
                self.last_error = str(exc)
                log.error("backfill.dimension_changed", extra=fields(error=str(exc)))
        await self.store.jobs.release([job])
        self.notify()
        return stored, False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await self._establish_vector_space()
        while True:
            await self._release_stale()
            self._wakeup.arm()
            jobs = self._claimed = await self.store.jobs.claim_embed(self.batch_size)
            self._draining = bool(jobs)
            if not jobs:
                await self._sleep_until_due()
                continue
            try:
                vectors = await self.embedder.embed([job.content for job in jobs])
            except EmbedderError as exc:
                self.last_error = str(exc)
                log.warning("backfill.embed_failed", extra=fields(jobs=len(jobs), error=str(exc)))
                await self.store.jobs.fail(jobs, str(exc))
                self._claimed = []
                continue
            self.last_error = None
            try:
                await self.store.jobs.complete_embed(list(zip(jobs, vectors, strict=True)))
            except EmbeddingModelMismatch as exc:
                # The backend changed its dimension under us: never mix vector spaces.
                self.last_error = str(exc)
                log.error("backfill.dimension_changed", extra=fields(error=str(exc)))
                await self.store.jobs.fail(jobs, str(exc))
                self._claimed = []
                continue
            self._claimed = []
            self.embedded_total += len(jobs)
            log.debug("backfill.embedded", extra=fields(jobs=len(jobs)))

    async def _release_stale(self) -> None:
        """Hand back the jobs left leased by a run a storage fault stopped, and by adds."""
        stale, self._claimed, self._hand_back = [*self._claimed, *self._hand_back], [], []
        if not stale:
            return
        try:
            await self.store.jobs.release(stale)
        except BaseException:
            self._hand_back = stale + self._hand_back  # still leased: the next run tries again
            raise

    async def _establish_vector_space(self) -> None:
        """Learn the embedder's dimension (HTTP backends may be down at start) and set up the store."""
        delay = 1.0
        self.awaiting_first_space = await trio.to_thread.run_sync(self.store.vector_space) is None
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
        self.awaiting_first_space = False
        if queued:
            log.info("backfill.queued", extra=fields(jobs=queued))

    async def _sleep_until_due(self) -> None:
        # Jobs made by another process (`memoryd import`) are found by the idle poll.
        await self._wakeup.sleep(await self.store.jobs.next_due_ms())
