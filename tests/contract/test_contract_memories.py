"""Memories through ``MemoryStore``: add, duplicate refresh, list order and paging, get and delete
by id or prefix, short ids."""

from __future__ import annotations

import pytest

from memoryd.errors import AmbiguousIdPrefix
from memoryd.store import Scope
from memoryd.store.interfaces import Backend
from tests.contract.helpers import note
from tests.store_helpers import Clock

ALICE = Scope("alice", "c1")


async def test_an_added_memory_is_what_get_gives_back(backend: Backend) -> None:
    record, duplicate = await backend.memories.add(note("I like green tea", subjects=["tea"]))
    assert not duplicate
    got = await backend.memories.get(ALICE, record.id)
    assert got is not None
    assert (got.id, got.content, got.owner, got.scope, got.subjects) == (
        record.id,
        "I like green tea",
        "alice",
        "personal",
        ["tea"],
    )


async def test_an_exact_duplicate_refreshes_the_live_memory_instead_of_adding(backend: Backend) -> None:
    first, _ = await backend.memories.add(note("I like green tea"))
    again, duplicate = await backend.memories.add(note("I like green tea"))
    assert duplicate and again.id == first.id
    assert [r.id for r in await backend.memories.list(ALICE, limit=10)] == [first.id]
    # The same words in another scope are another memory.
    other, duplicate = await backend.memories.add(note("I like green tea", "bob"))
    assert not duplicate and other.id != first.id


async def test_list_is_newest_first_and_pages_by_offset_and_by_before_id(backend: Backend, clock: Clock) -> None:
    ids = []
    for i in range(7):
        clock.at = 1_700_000_000_000 + i * 1000
        record, _ = await backend.memories.add(note(f"memory number {i}"))
        ids.append(record.id)
    newest_first = ids[::-1]
    assert [r.id for r in await backend.memories.list(ALICE, limit=10)] == newest_first
    assert [r.id for r in await backend.memories.list(ALICE, limit=3, offset=3)] == newest_first[3:6]
    page = await backend.memories.list(ALICE, limit=3)
    pages = [r.id for r in page]
    while page:
        page = await backend.memories.list(ALICE, limit=3, before_id=page[-1].id)
        pages += [r.id for r in page]
    assert pages == newest_first


async def test_get_and_delete_by_unique_prefix(backend: Backend) -> None:
    record, _ = await backend.memories.add(note("x"))
    assert (await backend.memories.get(ALICE, record.id[:9])).id == record.id  # type: ignore[union-attr]
    assert await backend.memories.delete(ALICE, record.id[:9]) == record.id
    assert await backend.memories.get(ALICE, record.id) is None
    assert await backend.memories.delete(ALICE, record.id) is None


async def test_a_prefix_of_several_visible_memories_is_ambiguous_and_names_how_many(backend: Backend) -> None:
    ids = [(await backend.memories.add(note(f"memory {i}")))[0].id for i in range(40)]
    # 40 ids over fewer possible first characters: some first character leads several.
    lead = max({i[0] for i in ids}, key=lambda c: sum(i.startswith(c) for i in ids))
    count = sum(i.startswith(lead) for i in ids)
    assert count > 1
    with pytest.raises(AmbiguousIdPrefix) as info:
        await backend.memories.get(ALICE, lead)
    assert str(count) in str(info.value)
    with pytest.raises(AmbiguousIdPrefix):
        await backend.memories.delete(ALICE, lead)
    assert len(await backend.memories.list(ALICE, limit=100)) == 40  # nothing was deleted


async def test_what_the_caller_cannot_see_cannot_be_got_deleted_or_make_a_prefix_ambiguous(backend: Backend) -> None:
    mine, _ = await backend.memories.add(note("mine"))
    theirs, _ = await backend.memories.add(note("theirs", "bob"))
    assert await backend.memories.get(ALICE, theirs.id) is None
    assert await backend.memories.delete(ALICE, theirs.id) is None
    assert await backend.memories.get(Scope("bob"), theirs.id) is not None
    assert (await backend.memories.get(ALICE, mine.id[:8])).id == mine.id  # type: ignore[union-attr]


async def test_short_ids_are_unique_among_what_the_caller_sees(backend: Backend) -> None:
    ids = [(await backend.memories.add(note(f"memory {i}")))[0].id for i in range(20)]
    short = await backend.memories.short_ids(ALICE, ids)
    assert set(short) == set(ids)
    assert all(len(s) >= 8 and full.startswith(s) for full, s in short.items())
    assert len(set(short.values())) == len(ids)


async def test_health_counts_and_condition(backend: Backend) -> None:
    empty = await backend.memories.health_counts()
    assert (empty["memories_active"], empty["users"]) == (0, 0)
    await backend.memories.add(note("one"))
    await backend.memories.add(note("two", "bob"))
    counts = await backend.memories.health_counts()
    assert counts["memories_active"] == 2 and counts["users"] == 2 and counts["db_bytes"] > 0
    # Users are the owners of live memories: several memories are one user, and an owner whose
    # every memory is deleted is none.
    for i in range(3):
        await backend.memories.add(note(f"more {i}", "carol"))
    gone, _ = await backend.memories.add(note("only one", "dave"))
    assert (await backend.memories.health_counts())["users"] == 4
    assert await backend.memories.delete(Scope("dave"), gone.id) == gone.id
    counts = await backend.memories.health_counts()
    assert (counts["memories_active"], counts["memories_deleted"], counts["users"]) == (5, 1, 3)
    assert backend.condition.state == "ok" and backend.memories.storage.state == "ok"
