"""Group commit (store/write_batch.py): writes that arrive together share a transaction, and
each keeps its own result, its own failure and its own rollback."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
import trio
import trio.testing

from memoryd.errors import StoreCorrupt
from memoryd.store.sqlite.db.database import Database
from memoryd.store.sqlite.db.write_batch import WriteBatcher
from tests.concurrency import gather_outcomes


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "t.db", readers=1, busy_timeout_ms=1000)
    database.write_sync(lambda c: c.execute("CREATE TABLE t (v INTEGER UNIQUE)"))
    database.open_readers()
    yield database
    database.close()


def insert(value: int):  # type: ignore[no-untyped-def]
    def run(c: apsw.Connection) -> int:
        c.execute("INSERT INTO t (v) VALUES (?)", (value,))
        return value * 10

    return run


def stored(db: Database) -> list[int]:
    return db.read_sync(lambda c: [v for (v,) in c.execute("SELECT v FROM t ORDER BY v")])


async def run_together(batcher: WriteBatcher, fns: list) -> list[object]:  # type: ignore[type-arg]
    """Run ``fns`` as concurrent writes, all queued behind a first write that holds the writer
    until they are, so they form one batch."""
    release = trio.Event()

    def hold(c: apsw.Connection) -> None:
        trio.from_thread.run(release.wait)

    async def release_once_all_queued() -> None:
        await trio.testing.wait_all_tasks_blocked()
        release.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(batcher.write, hold)
        await trio.testing.wait_all_tasks_blocked()
        results = await gather_outcomes(
            [*(functools.partial(batcher.write, fn) for fn in fns), release_once_all_queued]
        )
    return results[:-1]


async def test_concurrent_writes_share_transactions_and_each_gets_its_result(db: Database) -> None:
    batcher = WriteBatcher(db)
    results = await run_together(batcher, [insert(i) for i in range(20)])
    assert results == [i * 10 for i in range(20)]
    assert stored(db) == list(range(20))
    assert (batcher.batches, batcher.writes) == (2, 21)  # the holding write, then all 20 at once


async def test_a_lone_write_is_a_batch_of_one(db: Database) -> None:
    batcher = WriteBatcher(db)
    assert await batcher.write(insert(7)) == 70
    assert (batcher.batches, batcher.writes) == (1, 1)


async def test_a_failing_write_rolls_back_alone_and_only_its_caller_sees_the_error(db: Database) -> None:
    def half_then_refuse(c: apsw.Connection) -> None:
        c.execute("INSERT INTO t (v) VALUES (100)")
        raise ValueError("refused")

    batcher = WriteBatcher(db)
    results = await run_together(batcher, [insert(1), half_then_refuse, insert(2)])
    assert results[0] == 10 and results[2] == 20
    assert isinstance(results[1], ValueError)
    assert stored(db) == [1, 2]  # the refused write's own insert is gone


async def test_an_sqlite_error_fails_the_whole_batch_and_writes_nothing(db: Database) -> None:
    batcher = WriteBatcher(db)
    # The third write breaks the UNIQUE constraint: an SQLite error, as a full disk would be.
    results = await run_together(batcher, [insert(1), insert(2), insert(1)])
    assert all(isinstance(result, apsw.ConstraintError) for result in results), results
    assert stored(db) == []
    assert await batcher.write(insert(3)) == 30  # the next batch is fine
    assert stored(db) == [3]


async def test_a_row_that_does_not_decode_fails_the_batch_as_a_damaged_file(db: Database) -> None:
    # A write that reads a row damaged on disk (bad UTF-8) gets what a plain write would:
    # StoreCorrupt, and the store is marked corrupt; nothing of the batch is written.
    def reads_a_damaged_row(c: apsw.Connection) -> None:
        b"\xff".decode("utf-8")

    batcher = WriteBatcher(db)
    results = await run_together(batcher, [insert(1), reads_a_damaged_row])
    assert all(isinstance(result, StoreCorrupt) for result in results), results
    assert db.condition.current.state == "corrupt"
    assert stored(db) == []


async def test_a_write_cancelled_before_its_batch_runs_is_never_written(db: Database) -> None:
    batcher = WriteBatcher(db)
    release = trio.Event()

    def slow(c: apsw.Connection) -> None:
        trio.from_thread.run(release.wait)
        c.execute("INSERT INTO t (v) VALUES (1)")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(batcher.write, slow)
            await trio.testing.wait_all_tasks_blocked()
            with trio.CancelScope() as scope:
                scope.cancel()  # cancelled while the first batch holds the writer
                await batcher.write(insert(2))
            release.set()
    assert stored(db) == [1]
    assert (batcher.batches, batcher.writes) == (1, 1)
