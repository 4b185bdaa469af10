"""Store: delete by id or unique prefix among visible memories; short ids."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import numpy as np
import pytest

from memoryd.errors import InvalidParams
from memoryd.ids import now_ms
from memoryd.store import NewMemory, Scope, Store, memories

ALICE = Scope("alice", "c1")


def note(content: str, owner: str = "alice", shared: bool = False) -> NewMemory:
    return NewMemory(content=content, owner=owner, chat_id="c1", shared=shared, source="t")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "memory.db", readers=2) as s:
        yield s


def add_at_same_instant(store: Store, *news: NewMemory) -> list[str]:
    """Memories created in one millisecond: their ids share the first 10 characters."""
    instant = now_ms()

    def insert(db: apsw.Connection) -> list[str]:
        rowids = [memories.insert(db, new, instant) for new in news]
        return [db.execute("SELECT id FROM memories WHERE rowid = ?", (r,)).fetchone()[0] for r in rowids]

    return store._db.write_sync(insert)


async def test_delete_by_full_id(store: Store) -> None:
    record, _ = await store.add(note("x"))
    assert await store.delete(ALICE, record.id) == record.id


async def test_delete_by_unique_prefix_case_insensitively_with_look_alikes(store: Store) -> None:
    record, _ = await store.add(note("x"))
    prefix = record.id[:9].lower().replace("1", "l").replace("0", "o")
    assert await store.delete(ALICE, prefix) == record.id


@pytest.mark.parametrize("bad", ["", "0123456", "01ARZ3N", "01ARZ3ND!", "01ARZ3ND EKTSV4", "U" * 8, "0" * 27])
async def test_malformed_ids_are_invalid_params(store: Store, bad: str) -> None:
    with pytest.raises(InvalidParams) as info:
        await store.delete(ALICE, bad)
    assert info.value.data["field"] == "memory_id"


async def test_an_ambiguous_prefix_names_how_many_visible_memories_match(store: Store) -> None:
    ids = add_at_same_instant(store, note("a"), note("b"), note("c", owner="bob"), note("d", owner="bob"))
    prefix = ids[0][:10]
    with pytest.raises(InvalidParams) as info:
        await store.delete(ALICE, prefix)
    assert "2 of your memories" in info.value.message  # bob's two are not counted
    assert info.value.data["field"] == "memory_id"
    assert await store.delete(ALICE, ids[0]) == ids[0]
    # Now only one of alice's memories has the prefix: it is unique for her.
    assert await store.delete(ALICE, prefix) == ids[1]


async def test_other_users_ids_and_prefixes_resolve_to_nothing(store: Store) -> None:
    theirs, _ = await store.add(note("bob's", owner="bob"))
    assert await store.delete(ALICE, theirs.id) is None
    assert await store.delete(ALICE, theirs.id[:8]) is None
    assert [r.id for r in await store.list(Scope("bob"), limit=5)] == [theirs.id]


async def test_group_memories_of_another_chat_cannot_be_deleted(store: Store) -> None:
    shared, _ = await store.add(NewMemory(content="g", owner="alice", chat_id="c2", shared=True, source="t"))
    assert await store.delete(ALICE, shared.id) is None
    assert await store.delete(Scope("bob", "c2"), shared.id) == shared.id


async def test_an_expired_memory_can_still_be_deleted(store: Store) -> None:
    record, _ = await store.add(
        NewMemory(content="old", owner="alice", chat_id=None, shared=False, source="t", expires_at_ms=now_ms() - 1)
    )
    assert await store.delete(ALICE, record.id) == record.id
    assert await store.list(ALICE, limit=5, include_expired=True) == []


async def test_delete_removes_the_memory_from_every_retriever(store: Store) -> None:
    store.configure_vector_space("test:m", 8)
    record, _ = await store.add(note("sailing lessons"))
    [job] = await store.claim_embed_jobs(10)
    await store.complete_embed_jobs([(job, np.ones(8, dtype=np.float32))])
    assert len(await store.search(ALICE, "sailing", limit=5, query_vector=np.ones(8))) == 1
    await store.delete(ALICE, record.id)
    assert await store.search(ALICE, "sailing", limit=5, query_vector=np.ones(8)) == []
    assert await store.search(ALICE, "", limit=5, query_vector=np.ones(8)) == []


async def test_short_ids_are_the_shortest_unique_prefixes_of_at_least_eight(store: Store) -> None:
    ids = add_at_same_instant(store, note("a"), note("b"))
    lone, _ = await store.add(note("c", owner="zed"))
    short = await store.short_ids(ALICE, ids)
    for memory_id in ids:
        prefix = short[memory_id]
        assert len(prefix) >= 8 and memory_id.startswith(prefix)
        assert len(prefix) > len(_common(ids[0], ids[1]))
    assert (await store.short_ids(Scope("zed"), [lone.id]))[lone.id] == lone.id[:8]
    # Each short id deletes exactly its memory.
    assert await store.delete(ALICE, short[ids[1]]) == ids[1]


def _common(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]
