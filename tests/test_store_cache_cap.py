"""The process-wide cap on the store's cache memory (``storage.cache_mib``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
import trio

from memoryd.server.daemon import Daemon
from memoryd.store import NewMemory
from memoryd.store.sqlite import Store
from tests.conftest import make_config

MiB = 1 << 20


def cache_memory() -> tuple[int, int]:
    """(bytes SQLite holds now in this process, the cap Store.limit_cache_memory set, 0 = none)."""
    return apsw.memory_used(), apsw.soft_heap_limit(-1)


@pytest.fixture
def restore_cap() -> Iterator[None]:
    """The cap is process-wide: put back whatever the rest of the suite runs with."""
    _, before = cache_memory()
    yield
    Store.limit_cache_memory(before)


def _fill(store: Store, count: int = 4000) -> None:
    # ~1 KB each: with FTS and indexes several MiB of pages, well past a 1 MiB cap.
    filler = " ".join(f"word{i}" for i in range(120))
    store.memories.add_many(NewMemory(f"note {n} {filler}", "alice", None, False, "test") for n in range(count))


def _read_every_page(store: Store) -> int:
    # export reads every memory from one snapshot: the whole table through the page cache.
    return store.lifecycle.export(lambda line: None, user=None)


def _cache_growth_of_a_full_read(path: Path, cap_bytes: int) -> int:
    Store.limit_cache_memory(cap_bytes)
    with Store(path, readers=1) as store:
        before, _ = cache_memory()
        assert _read_every_page(store) == 4000
        after, _ = cache_memory()
    return after - before


def test_a_full_read_fills_the_page_cache_without_a_cap_and_not_past_the_cap_with_one(
    tmp_path: Path, restore_cap: None
) -> None:
    path = tmp_path / "memory.db"
    with Store(path) as store:
        _fill(store)
    uncapped = _cache_growth_of_a_full_read(path, 0)
    assert uncapped > 2 * MiB  # the pages read stay cached: the cap below has something to bound
    used_before, _ = cache_memory()
    capped = _cache_growth_of_a_full_read(path, 1 * MiB)
    # SQLite may pass a soft cap by the pages in use at one moment, never by the whole file.
    assert used_before + capped <= max(used_before, 1 * MiB) + 1 * MiB
    assert capped < uncapped / 2


def test_the_cap_is_soft_every_row_is_still_read_under_a_tiny_cap(tmp_path: Path, restore_cap: None) -> None:
    path = tmp_path / "memory.db"
    with Store(path) as store:
        _fill(store, 500)
    Store.limit_cache_memory(4096)  # less than one page's worth: pages are recycled, nothing fails
    with Store(path, readers=1) as store:
        assert _read_every_page(store) == 500
        _fill(store, 10)  # and writes go through
        assert _read_every_page(store) == 510


@pytest.mark.parametrize("cache_mib", [7, 0])
async def test_the_daemon_sets_the_configured_cap_before_it_opens_the_store(
    short_tmp: Path, restore_cap: None, cache_mib: int
) -> None:
    Store.limit_cache_memory(123 * MiB)
    daemon = Daemon(make_config(short_tmp, storage={"cache_mib": cache_mib}))
    async with trio.open_nursery() as nursery:
        with trio.fail_after(30):
            await nursery.start(daemon.run)
        assert cache_memory()[1] == cache_mib * MiB
        daemon.request_stop()
