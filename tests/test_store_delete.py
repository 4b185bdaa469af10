"""Store: delete by id or unique prefix among visible memories; short ids."""

from __future__ import annotations

import pytest

from memoryd.errors import AmbiguousIdPrefix
from memoryd.ids import new_ulid, now_ms
from memoryd.store import NewMemory, Scope
from memoryd.store.sqlite import Store
from tests.store_helpers import Clock, note, sql

ALICE = Scope("alice", "c1")


async def add_at_same_instant(store: Store, clock: Clock, *news: NewMemory) -> list[str]:
    """Memories with ids as older versions made them in one millisecond: ULIDs sharing their
    first 10 characters (new ids never share 8)."""
    clock.at = now_ms()
    try:
        ids = []
        for new in news:
            record, _ = await store.memories.add(new)
            ulid = new_ulid(clock.at)
            sql(store.path, "UPDATE memories SET id = ? WHERE id = ?", (ulid, record.id))
            ids.append(ulid)
        return ids
    finally:
        clock.at = None


async def test_an_ambiguous_prefix_names_how_many_visible_memories_match(store: Store, clock: Clock) -> None:
    ids = await add_at_same_instant(store, clock, note("a"), note("b"), note("c", "bob"), note("d", "bob"))
    prefix = ids[0][:10]
    with pytest.raises(AmbiguousIdPrefix) as info:
        await store.memories.delete(ALICE, prefix)
    assert info.value.count == 2  # bob's two are not counted
    assert "2 of your memories" in str(info.value)
    assert await store.memories.delete(ALICE, ids[0]) == ids[0]
    # Now only one of alice's memories has the prefix: it is unique for her.
    assert await store.memories.delete(ALICE, prefix) == ids[1]


async def test_short_ids_are_the_shortest_unique_prefixes_of_at_least_eight(store: Store, clock: Clock) -> None:
    ids = await add_at_same_instant(store, clock, note("a"), note("b"))
    lone, _ = await store.memories.add(note("c", "zed"))
    short = await store.memories.short_ids(ALICE, ids)
    for memory_id in ids:
        prefix = short[memory_id]
        assert len(prefix) >= 8 and memory_id.startswith(prefix)
        assert len(prefix) > len(_common(ids[0], ids[1]))
    assert (await store.memories.short_ids(Scope("zed"), [lone.id]))[lone.id] == lone.id[:8]
    # Each short id deletes exactly its memory.
    assert await store.memories.delete(ALICE, short[ids[1]]) == ids[1]


def _common(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]
