"""A search's query vector: awaited by the search, or started at once where the embedder can.

A search needs its vector only for its vector part, so the store takes the vector as something to
wait for (``QueryVector.wait``) rather than a value: a backend may run the keyword part meanwhile.
Where the embedder can start the query at once on a thread of its own (the local model, idle),
``start_now`` gives the running computation, and a backend that searches on a worker thread may
wait for it there (``VectorUnderWay``); a backend that cannot use that simply awaits ``wait``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]

#: The vector of a query started at once, waited for in the caller's thread: given a function
#: that raises when the waiting search was cancelled (each backend passes its own), it returns
#: the vector, or None for a keyword-only search (the embedder failed or was too slow).
VectorUnderWay = Callable[[Callable[[], None]], FloatArray | None]


async def _no_vector() -> None:
    return None


def _not_now() -> None:
    return None


class QueryVector:
    """The query's vector, to be awaited: ``wait()`` gives it, or None (keyword-only search)."""

    __slots__ = ("_wait", "_start_now", "known")

    def __init__(
        self,
        wait: Callable[[], Awaitable[FloatArray | None]],
        start_now: Callable[[], VectorUnderWay | None] = _not_now,
    ) -> None:
        """``start_now``: the query started at once on the embedder's own thread, or None when
        it cannot start right now (the search then awaits ``wait``)."""
        self._wait = wait
        self._start_now = start_now
        #: The vector when it was at hand from the start (``at_hand``), else None.
        self.known: FloatArray | None = None

    @classmethod
    def at_hand(cls, vector: npt.ArrayLike | None) -> QueryVector:
        """A vector the caller already has (None: a keyword-only search)."""
        known = None if vector is None else np.asarray(vector, dtype=np.float32)

        async def ready() -> FloatArray | None:
            return known

        query = cls(ready if known is not None else _no_vector)
        query.known = known
        return query

    async def wait(self) -> FloatArray | None:
        vector = await self._wait()
        return None if vector is None else np.asarray(vector, dtype=np.float32)

    def start_now(self) -> VectorUnderWay | None:
        return None if self.known is not None else self._start_now()
