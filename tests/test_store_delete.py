"""Store: delete by id or unique prefix among visible memories; short ids."""

from __future__ import annotations

import pytest

from memoryd.errors import AmbiguousIdPrefix
from memoryd.ids import new_ulid, now_ms
from memoryd.store import QueryVector, NewMemory, Scope
from memoryd.store.sqlite import Store
from tests.store_helpers import Clock, embed_all, note, sql, unit

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


async def test_delete_by_full_id(store: Store) -> None:
    record, _ = await store.memories.add(note("x"))
    assert await store.memories.delete(ALICE, record.id) == record.id


async def test_delete_by_unique_prefix(store: Store) -> None:
    record, _ = await store.memories.add(note("x"))
    assert await store.memories.delete(ALICE, record.id[:9]) == record.id


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


async def test_other_users_ids_and_prefixes_resolve_to_nothing(store: Store) -> None:
    theirs, _ = await store.memories.add(note("bob's", "bob"))
    assert await store.memories.delete(ALICE, theirs.id) is None
    assert await store.memories.delete(ALICE, theirs.id[:8]) is None
    assert [r.id for r in await store.memories.list(Scope("bob"), limit=5)] == [theirs.id]


async def test_group_memories_of_another_chat_cannot_be_deleted(store: Store) -> None:
    shared, _ = await store.memories.add(note("g", chat_id="c2", shared=True))
    assert await store.memories.delete(ALICE, shared.id) is None
    assert await store.memories.delete(Scope("bob", "c2"), shared.id) == shared.id


async def test_an_expired_memory_can_still_be_deleted(store: Store) -> None:
    record, _ = await store.memories.add(note("old", expires_at_ms=now_ms() - 1))
    assert await store.memories.delete(ALICE, record.id) == record.id
    assert await store.memories.list(ALICE, limit=5, include_expired=True) == []


async def test_delete_removes_the_memory_from_every_retriever(store: Store) -> None:
    store.configure_vector_space("test:m", 8)
    record, _ = await store.memories.add(note("sailing lessons"))
    ones = unit(8, *[1.0] * 8)
    await embed_all(store, {}, ones)
    assert len(await store.memories.search(ALICE, "sailing", limit=5, vector=QueryVector.at_hand(ones))) == 1
    await store.memories.delete(ALICE, record.id)
    assert await store.memories.search(ALICE, "sailing", limit=5, vector=QueryVector.at_hand(ones)) == []
    assert await store.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(ones)) == []


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
