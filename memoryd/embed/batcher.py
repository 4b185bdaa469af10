"""Coalescing: concurrent embed() calls become one backend call.

Per-call overhead dominates small requests (a local forward pass streams all weights however
few texts it has; an HTTP call pays a round trip), so while one backend call runs, the
requests that arrive meanwhile wait and then go together in the next one.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import trio

from memoryd.embed.base import Embedder, ImmediateEmbedder
from memoryd.embed.vectors import F32, empty, text_batch
from memoryd.errors import EmbedderError
from memoryd.log import fields

log = logging.getLogger("memoryd.embed")


@dataclass(eq=False)
class _Request:
    texts: list[str]
    done: trio.Event = field(default_factory=trio.Event)
    result: F32 | None = None
    error: BaseException | None = None
    abandoned: bool = False


class CoalescingEmbedder:
    """An :class:`~memoryd.embed.base.Embedder` that merges concurrent calls to ``inner``.

    Start :meth:`run` in a nursery (``await nursery.start(embedder.run)``); it is the one task
    that calls ``inner.embed``, with up to ``max_batch`` texts gathered from every caller
    waiting at that moment (one caller's larger request goes alone).  While :meth:`run` is not
    running, embed() simply calls ``inner`` directly.
    """

    def __init__(self, inner: Embedder, max_batch: int = 64) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.inner = inner
        self._immediate = inner if isinstance(inner, ImmediateEmbedder) else None
        self.max_batch = max_batch
        self._queue: deque[_Request] = deque()
        self._wakeup = trio.Event()
        self._running = False
        self._backend_calls = 0
        self._texts = 0
        self._queries_at_once = 0

    @property
    def model_id(self) -> str | None:
        return self.inner.model_id

    @property
    def dim(self) -> int | None:
        return self.inner.dim

    async def start(self) -> None:
        await self.inner.start()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def describe(self) -> dict[str, Any]:
        info = dict(self.inner.describe())
        info["coalescing"] = {
            "running": self._running,
            "max_batch": self.max_batch,
            "queued": len(self._queue),
            "backend_calls": self._backend_calls,
            "texts": self._texts,
            "queries_at_once": self._queries_at_once,
        }
        return info

    def embed_query_now(self, text: str) -> Future[F32] | None:
        """The inner embedder's, when it has one and no caller is waiting for a pass here (a
        query never goes ahead of queued ones)."""
        if self._immediate is None or self._queue:
            return None
        under_way = self._immediate.embed_query_now(text)
        self._queries_at_once += under_way is not None
        return under_way

    async def embed(self, texts: Sequence[str]) -> F32:
        if not self._running:
            return await self.inner.embed(texts)
        batch = text_batch(texts)
        if not batch:
            return empty(self.dim)
        request = _Request(batch)
        self._queue.append(request)
        self._wakeup.set()
        try:
            await request.done.wait()
        except BaseException:
            request.abandoned = True  # not sent if still queued; its share is dropped otherwise
            raise
        if request.error is not None:
            # A fresh exception per caller: one object raised in many tasks would share a traceback.
            raise EmbedderError(str(request.error)) from request.error
        assert request.result is not None
        return request.result

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serves queued requests until cancelled; then fails whatever is still waiting."""
        if self._running:
            raise RuntimeError("CoalescingEmbedder.run() is already running")
        self._running = True
        in_flight: list[_Request] = []
        try:
            task_status.started()
            while True:
                while not self._queue:
                    self._wakeup = trio.Event()
                    await self._wakeup.wait()
                # One more scheduling round, so callers woken in this same moment join the batch.
                await trio.lowlevel.checkpoint()
                in_flight = self._take()
                if in_flight:
                    await self._serve(in_flight)
                in_flight = []
        finally:
            self._running = False
            stopped = EmbedderError("embedder is shutting down")
            for request in [*in_flight, *self._queue]:
                if not request.done.is_set():
                    request.error = stopped
                    request.done.set()
            self._queue.clear()

    def _take(self) -> list[_Request]:
        taken: list[_Request] = []
        count = 0
        while self._queue:
            request = self._queue[0]
            if request.abandoned:
                self._queue.popleft()
                continue
            if taken and count + len(request.texts) > self.max_batch:
                break
            taken.append(self._queue.popleft())
            count += len(request.texts)
        return taken

    async def _serve(self, requests: list[_Request]) -> None:
        texts = [text for request in requests for text in request.texts]
        self._backend_calls += 1
        self._texts += len(texts)
        try:
            vectors = await self.inner.embed(texts)
        except Exception as exc:
            if not isinstance(exc, EmbedderError):
                log.error("embedding backend raised unexpectedly", exc_info=True)
                exc = EmbedderError(f"embedding backend failed: {type(exc).__name__}")
            for request in requests:
                request.error = exc
                request.done.set()
            return
        log.debug("coalesced embedding call", extra=fields(callers=len(requests), texts=len(texts)))
        offset = 0
        for request in requests:
            request.result = vectors[offset : offset + len(request.texts)]
            offset += len(request.texts)
            request.done.set()
