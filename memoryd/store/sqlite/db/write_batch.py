"""Group commit: small writes that arrive together (``memory.add``'s, ``memory.observe``'s; the
store has one batcher for both) share one write transaction.

``memory.add`` at 32 concurrent clients spent about a third of its CPU on the fixed cost of a
write: the hop to the writer thread, the writer's limiter, BEGIN IMMEDIATE and COMMIT.  Here the
first caller to find no batch running leads: it takes every write queued so far (its own
included) into one ``Database.write``, each inside a SAVEPOINT of its own.  The others wait for
that batch and, if theirs was not in it, the next one leads.  No background task: a batch runs
in the task of a caller that is waiting for it anyway.

Each write keeps its own outcome: an exception raised by one (a refused ``supersedes``) rolls
back its savepoint only and is raised to its caller alone.  An SQLite error or a row that does
not decode fails the whole transaction, so every write of the batch gets it: for the storage's
errors (disk full, a damaged file, busy) as each would have on its own; an SQLite error of one
write's own making (a constraint) would fail its batch-mates too, which the validation in front
of every batched write keeps from happening.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import apsw
import trio

from memoryd.store.sqlite.db.condition import UNDECODABLE_ROW
from memoryd.store.sqlite.db.database import Database

T = TypeVar("T")

#: Writes per transaction at most: bounds how long the writer is held and one failure's reach.
MAX_BATCH = 64


class _Pending(Generic[T]):
    def __init__(self, fn: Callable[[apsw.Connection], T]) -> None:
        self.fn = fn
        self.done = False
        self.value: T | None = None
        self.error: BaseException | None = None

    def finish(self, value: T | None = None, error: BaseException | None = None) -> None:
        self.done, self.value, self.error = True, value, error

    def unwrap(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]  # T itself may be None


class WriteBatcher:
    def __init__(self, db: Database, *, max_batch: int = MAX_BATCH) -> None:
        self._db = db
        self._max_batch = max_batch
        self._queue: list[_Pending[Any]] = []
        self._leading = False
        self._batch_done = trio.Event()
        #: Transactions run and writes in them, since start (a batch of one is a plain write).
        self.batches = 0
        self.writes = 0

    async def write(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run ``fn(connection)`` in a write transaction, maybe shared with other writes."""
        pending: _Pending[T] = _Pending(fn)
        self._queue.append(pending)
        try:
            while not pending.done:
                if self._leading:
                    await self._batch_done.wait()
                else:
                    await self._lead()
        except BaseException:
            # Cancelled before its batch was taken: it never runs.
            if pending in self._queue:
                self._queue.remove(pending)
            raise
        return pending.unwrap()

    async def _lead(self) -> None:
        self._leading = True
        batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
        try:
            await self._db.write(_run_each, batch)
            self.batches += 1
            self.writes += len(batch)
        except BaseException as exc:
            if not isinstance(exc, Exception) and not any(p.done for p in batch):
                # Cancelled before the transaction ran (waiting for the writer): put them back
                # for the next leader; this caller's own write is removed by ``write``.
                self._queue[:0] = batch
                raise
            for pending in batch:
                pending.finish(error=exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._leading = False
            done, self._batch_done = self._batch_done, trio.Event()
            done.set()


def _run_each(db: apsw.Connection, batch: list[_Pending[Any]]) -> None:
    for pending in batch:
        try:
            with db:  # a SAVEPOINT inside the batch's transaction
                value = pending.fn(db)
        except (apsw.Error, *UNDECODABLE_ROW):
            # The storage's problem (a damaged row too: reported as such by the transaction's
            # reporting_to): fail the transaction, and with it the batch.
            raise
        except Exception as exc:
            pending.finish(error=exc)
        else:
            pending.finish(value)
