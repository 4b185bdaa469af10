"""A search's query vector: awaited from the embedder, or started at once on its own thread.

Either way a search never fails because the embedder does: past ``query_timeout``, or when the
embedder fails, the search ranks by keywords alone (logged as ``search.keyword_only``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np
import trio

from memoryd.embed import Embedder, ImmediateEmbedder
from memoryd.embed.query_form import embedded_form
from memoryd.errors import EmbedderError
from memoryd.log import fields
from memoryd.store.query_vector import QueryVector

log = logging.getLogger("memoryd.service")

#: How often a reader thread waiting for a query started at once looks whether its search was
#: cancelled (the client left, the daemon stops): it is not woken by the cancellation itself.
CANCEL_POLL_SECONDS = 0.05


class QueryVectors:
    """The query vectors of ``embedder``'s space, each within ``timeout`` seconds or not at all."""

    def __init__(self, embedder: Embedder, timeout: float) -> None:
        self._embedder = embedder
        self._immediate = embedder if isinstance(embedder, ImmediateEmbedder) else None
        self._timeout = timeout

    def vector(self, query: str) -> QueryVector:
        """The vector of ``query`` for a search (of its embedded_form): awaited, or started at
        once when it can be."""
        text = embedded_form(query)
        return QueryVector(functools.partial(self.embed, text), functools.partial(self.start, text))

    async def embed(self, query: str) -> np.ndarray | None:
        """The vector, or None (keyword only)."""
        try:
            with trio.fail_after(self._timeout):
                vectors = await self._embedder.embed([query])
        except (EmbedderError, trio.TooSlowError) as exc:
            _keyword_only(type(exc).__name__)
            return None
        vector: np.ndarray = vectors[0]
        return vector

    def start(self, query: str) -> functools.partial[np.ndarray | None] | None:
        """``QueryVector.start_now``: the wait for the query started now on the embedder's own
        thread, or None when it cannot start now (the search awaits ``embed``)."""
        under_way = None if self._immediate is None else self._immediate.embed_query_now(query)
        if under_way is None:
            return None
        # The time limit counts from now, as embed()'s does: the search reads its keyword part
        # before it waits.
        return functools.partial(_wait, under_way, time.monotonic() + self._timeout)


def _wait(under_way: Future[np.ndarray], deadline: float, check_cancelled: Callable[[], None]) -> np.ndarray | None:
    """In the search's own thread: the vector, or None past ``deadline`` or when the embedder
    failed.  A vector that is there is taken, however late.  ``check_cancelled`` (the store's)
    raises when the search was cancelled."""
    while True:
        remaining = deadline - time.monotonic()
        try:
            return under_way.result(timeout=max(0.0, min(remaining, CANCEL_POLL_SECONDS)))
        except TimeoutError:
            if remaining <= CANCEL_POLL_SECONDS:
                _keyword_only("TooSlowError")  # the name embed()'s trio.fail_after gives it
                return None
            check_cancelled()  # raises in a cancelled search (trio.Cancelled in a trio worker thread)
        except EmbedderError as exc:
            _keyword_only(type(exc).__name__)
            return None


def _keyword_only(reason: str) -> None:
    log.warning("search.keyword_only", extra=fields(reason=reason))
