"""One reader connection holding one read transaction across several worker-thread calls.

``Database.read`` runs one function in one transaction.  A search that overlaps its parts with
other work (the query's embedding, a second reader's vector scan) runs them as separate calls,
and they must all read the same snapshot: the transaction begins with the first call and ends
with the last (``finish=True``) or when the snapshot is left.  Calls take turns (a trio lock):
a connection is never used by two threads at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import apsw
import trio

from memoryd.errors import StoreBusy
from memoryd.store.sqlite.db.condition import StorageCondition, reporting_to

P = ParamSpec("P")
T = TypeVar("T")


class ReadSnapshot:
    """A reader borrowed from the pool (``Database.snapshot``); given back when the ``with`` of
    ``Database.snapshot()`` or ``spare_snapshot()`` ends."""

    def __init__(self, reader: apsw.Connection, condition: StorageCondition, busy_timeout_ms: int) -> None:
        self.reader = reader
        self._condition = condition
        self._busy_timeout_ms = busy_timeout_ms
        self._turn = trio.Lock()
        self._open = False

    async def run(
        self,
        fn: Callable[Concatenate[apsw.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(reader, ...)`` in a worker thread, inside the snapshot's transaction."""
        return await self._take_turn(fn, args, kwargs, finish=False)

    async def finish(
        self,
        fn: Callable[Concatenate[apsw.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Like ``run``, and the transaction ends in the same thread call (the last call)."""
        return await self._take_turn(fn, args, kwargs, finish=True)

    async def _take_turn(
        self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], *, finish: bool
    ) -> T:
        async with self._turn:
            try:
                return await trio.to_thread.run_sync(lambda: self._call(fn, args, kwargs, finish=finish))
            except apsw.BusyError:
                raise StoreBusy(self._busy_timeout_ms) from None

    def _call(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], *, finish: bool) -> T:
        with reporting_to(self._condition, writing=False):
            if not self._open:
                # Deferred: the snapshot is taken by fn's first read, and kept until the end.
                self.reader.execute("BEGIN")
                self._open = True
            try:
                return fn(self.reader, *args, **kwargs)
            finally:
                if finish:
                    self.end()

    def end(self) -> None:
        """End the read transaction, if one is open (cheap: a read transaction wrote nothing)."""
        if self._open:
            self._open = False
            if not self.reader.getautocommit():
                self.reader.execute("ROLLBACK")
