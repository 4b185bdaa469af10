"""People through ``PeopleStore``: learned from memories, aliases, merge, forget."""

from __future__ import annotations

import pytest

from memoryd.store import AliasTaken, Scope
from memoryd.store.interfaces import Backend
from tests.contract.helpers import note

ALICE = Scope("alice")


async def remember(backend: Backend, content: str, owner: str = "alice", *, about_someone: bool = True) -> str:
    record, _ = await backend.memories.add(note(content, owner))
    learned = await backend.people.learn(owner, record.id, content, [], (owner,))
    assert bool(learned.linked) == about_someone
    return record.id


async def test_people_are_learned_per_owner(backend: Backend) -> None:
    await remember(backend, "My wife Sarah loves jazz")
    await remember(backend, "My brother Tom plays chess", "bob")
    assert [p.name for p in await backend.people.people_of("alice")] == ["Sarah"]
    assert await backend.people.find("bob", "Sarah") is None
    sarah = await backend.people.find("alice", "my wife")
    assert sarah is not None and sarah.name == "Sarah"


async def test_an_alias_finds_the_person_and_a_taken_alias_is_refused(backend: Backend) -> None:
    await remember(backend, "My wife Sarah loves jazz")
    await remember(backend, "My friend Tom plays chess")
    person = await backend.people.add_alias("alice", "Sarah", "Sally")
    assert person is not None and "Sally" in person.aliases
    assert (await backend.people.find("alice", "Sally")).name == "Sarah"  # type: ignore[union-attr]
    with pytest.raises(AliasTaken):
        await backend.people.add_alias("alice", "Sarah", "Tom")
    assert await backend.people.add_alias("alice", "Nobody", "X") is None


async def test_merge_folds_one_person_into_another_with_their_memories(backend: Backend) -> None:
    await remember(backend, "My wife Sarah loves jazz")
    await remember(backend, "My friend Sally bakes bread")
    merge = await backend.people.merge("alice", "Sally", "Sarah")
    assert merge.merged is not None and merge.merged.name == "Sarah" and "Sally" in merge.merged.aliases
    assert [p.name for p in await backend.people.people_of("alice")] == ["Sarah"]
    sarah = merge.merged
    assert len(await backend.people.memories_about(ALICE, sarah, limit=10)) == 2
    assert await backend.people.counts(ALICE, [sarah]) == {sarah.id: 2}
    unchanged = await backend.people.merge("alice", "Sarah", "Nobody")
    assert unchanged.merged is None


async def test_forget_deletes_what_the_caller_sees_about_a_person(backend: Backend) -> None:
    first = await remember(backend, "My wife Sarah loves jazz")
    await remember(backend, "I like tea", about_someone=False)
    forgotten = await backend.people.forget(ALICE, "Sarah", delete_person=True)
    assert forgotten is not None and forgotten.memory_ids == [first] and forgotten.person_deleted
    assert await backend.memories.get(ALICE, first) is None
    assert await backend.people.find("alice", "Sarah") is None
    assert [r.content for r in await backend.memories.list(ALICE, limit=10)] == ["I like tea"]
    assert await backend.people.forget(ALICE, "Sarah", delete_person=True) is None


async def test_learning_creates_nobody_past_max_people_but_still_links_who_exists(backend: Backend) -> None:
    await remember(backend, "My wife Sarah loves jazz")
    record, _ = await backend.memories.add(note("Dinner with Sarah and Tom", "alice"))
    learned = await backend.people.learn("alice", record.id, record.content, ["Sarah", "Tom"], ("alice",), max_people=1)
    assert learned.linked == ["Sarah"] and not learned.changed
    assert [p.name for p in await backend.people.people_of("alice")] == ["Sarah"]
    learned = await backend.people.learn("alice", record.id, record.content, ["Tom"], ("alice",), max_people=2)
    assert sorted(learned.linked) == ["Sarah", "Tom"] and learned.changed  # Sarah: named in the content
