"""Delete by id or unique prefix among visible memories, through ``MemoryStore`` (moved here from
the SQLite store's tests: every backend owes it)."""

from __future__ import annotations

from memoryd.ids import now_ms
from memoryd.store import QueryVector, Scope
from memoryd.store.interfaces import Backend
from tests.contract.helpers import embed_all, note, unit

ALICE = Scope("alice", "c1")


async def test_delete_by_full_id(backend: Backend) -> None:
    record, _ = await backend.memories.add(note("x"))
    assert await backend.memories.delete(ALICE, record.id) == record.id


async def test_delete_by_unique_prefix(backend: Backend) -> None:
    record, _ = await backend.memories.add(note("x"))
    assert await backend.memories.delete(ALICE, record.id[:9]) == record.id


async def test_other_users_ids_and_prefixes_resolve_to_nothing(backend: Backend) -> None:
    theirs, _ = await backend.memories.add(note("bob's", "bob"))
    assert await backend.memories.delete(ALICE, theirs.id) is None
    assert await backend.memories.delete(ALICE, theirs.id[:8]) is None
    assert [r.id for r in await backend.memories.list(Scope("bob"), limit=5)] == [theirs.id]


async def test_group_memories_of_another_chat_cannot_be_deleted(backend: Backend) -> None:
    shared, _ = await backend.memories.add(note("g", chat_id="c2", shared=True))
    assert await backend.memories.delete(ALICE, shared.id) is None
    assert await backend.memories.delete(Scope("bob", "c2"), shared.id) == shared.id


async def test_an_expired_memory_can_still_be_deleted(backend: Backend) -> None:
    record, _ = await backend.memories.add(note("old", expires_at_ms=now_ms() - 1))
    assert await backend.memories.delete(ALICE, record.id) == record.id
    assert await backend.memories.list(ALICE, limit=5, include_expired=True) == []


async def test_delete_removes_the_memory_from_every_retriever(backend: Backend) -> None:
    record, _ = await backend.memories.add(note("sailing lessons"))
    ones = unit(*[1.0] * 8)
    await embed_all(backend, lambda content: ones)
    assert len(await backend.memories.search(ALICE, "sailing", limit=5, vector=QueryVector.at_hand(ones))) == 1
    await backend.memories.delete(ALICE, record.id)
    assert await backend.memories.search(ALICE, "sailing", limit=5, vector=QueryVector.at_hand(ones)) == []
    assert await backend.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(ones)) == []
