"""People through ``PeopleStore``: learned from memories, aliases, merge, forget; a person is known
only where a memory about them may be seen."""

from __future__ import annotations

import pytest

from memoryd.store import AliasTaken, Provenance, Scope
from memoryd.store.interfaces import Backend
from tests.contract.helpers import note

ALICE = Scope("alice")


async def remember(backend: Backend, content: str, owner: str = "alice", *, about_someone: bool = True) -> str:
    record, _ = await backend.memories.add(note(content, owner))
    learned = await backend.people.learn(owner, record.id, content, [], (owner,), seen_by=Scope(owner))
    assert bool(learned.linked) == about_someone
    return record.id


async def test_people_are_learned_per_owner(backend: Backend) -> None:
    await remember(backend, "My wife Sarah loves jazz")
    await remember(backend, "My brother Tom plays chess", "bob")
    assert [p.name for p in await backend.people.people_of("alice")] == ["Sarah"]
    assert await backend.people.find(Scope("bob"), "Sarah") is None
    sarah = await backend.people.find(ALICE, "my wife")
    assert sarah is not None and sarah.name == "Sarah"


async def test_an_alias_finds_the_person_and_a_taken_alias_is_refused(backend: Backend) -> None:
    await remember(backend, "My wife Sarah loves jazz")
    await remember(backend, "My friend Tom plays chess")
    person = await backend.people.add_alias(ALICE, "Sarah", "Sally")
    assert person is not None and "Sally" in person.aliases
    assert (await backend.people.find(ALICE, "Sally")).name == "Sarah"  # type: ignore[union-attr]
    with pytest.raises(AliasTaken):
        await backend.people.add_alias(ALICE, "Sarah", "Tom")
    assert await backend.people.add_alias(ALICE, "Nobody", "X") is None


async def test_merge_folds_one_person_into_another_with_their_memories(backend: Backend) -> None:
    await remember(backend, "My wife Sarah loves jazz")
    await remember(backend, "My friend Sally bakes bread")
    merge = await backend.people.merge(ALICE, "Sally", "Sarah")
    assert merge.merged is not None and merge.merged.name == "Sarah" and "Sally" in merge.merged.aliases
    assert [p.name for p in await backend.people.people_of("alice")] == ["Sarah"]
    sarah = merge.merged
    assert len(await backend.people.memories_about(ALICE, sarah, limit=10)) == 2
    assert await backend.people.counts(ALICE, [sarah]) == {sarah.id: 2}
    unchanged = await backend.people.merge(ALICE, "Sarah", "Nobody")
    assert unchanged.merged is None


async def test_forget_deletes_what_the_caller_sees_about_a_person(backend: Backend) -> None:
    first = await remember(backend, "My wife Sarah loves jazz")
    await remember(backend, "I like tea", about_someone=False)
    forgotten = await backend.people.forget(ALICE, "Sarah", delete_person=True)
    assert forgotten is not None and forgotten.memory_ids == [first] and forgotten.person_deleted
    assert await backend.memories.get(ALICE, first) is None
    assert await backend.people.find(ALICE, "Sarah") is None
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


async def test_a_person_learned_in_a_private_chat_is_unknown_in_a_group(backend: Backend) -> None:
    dm = Scope("alice", chat_id="dm", chat_type="private")
    group = Scope("alice", chat_id="g1", chat_type="group")
    content = "My sister Mia is pregnant"
    record, _ = await backend.memories.add(note(content, chat_id="dm", provenance=Provenance(chat_type="private")))
    learned = await backend.people.learn("alice", record.id, content, [], ("alice",), seen_by=dm)
    assert learned.linked == ["Mia"]
    mia = await backend.people.find(dm, "Mia")
    assert mia is not None and mia.name == "Mia"
    assert await backend.people.find(group, "Mia") is None
    assert await backend.people.find(group, "my sister") is None
    assert [p.name for p in await backend.people.visible_people(dm)] == ["Mia"]
    assert await backend.people.visible_people(group) == []
    assert await backend.people.visible_rowids(group, [mia.rowid]) == set()
    assert await backend.people.add_alias(group, "Mia", "Mimi") is None
    assert (await backend.people.merge(group, "Mia", "Mia")).merged is None


async def test_a_hidden_person_is_never_picked_by_the_indexed_lookups(backend: Backend) -> None:
    """Learning resolves through the owner's cached index; a person the adder may not know of
    is left out (another may answer), and counts as nobody against max_people."""
    dm = Scope("alice", chat_id="dm", chat_type="private")
    group = Scope("alice", chat_id="g1", chat_type="group")
    first, _ = await backend.memories.add(
        note("My sister Mia is pregnant", chat_id="dm", provenance=Provenance(chat_type="private"))
    )
    await backend.people.learn("alice", first.id, first.content, [], ("alice",), seen_by=dm)
    record, _ = await backend.memories.add(
        note("Lunch with Mia", chat_id="g1", provenance=Provenance(chat_type="group"))
    )
    full = await backend.people.learn(
        "alice", record.id, record.content, ["Mia"], ("alice",), seen_by=group, max_people=1
    )
    assert full.linked == [] and not full.changed  # hidden Mia is not picked, and nobody fits
    learned = await backend.people.learn("alice", record.id, record.content, ["Mia"], ("alice",), seen_by=group)
    assert learned.linked == ["Mia"] and learned.changed
    assert len(await backend.people.people_of("alice")) == 2  # the group's Mia is a person of its own
    (group_mia,) = await backend.people.visible_people(group)
    private_mia = await backend.people.find(dm, "Mia")
    assert private_mia is not None and private_mia.id != group_mia.id and private_mia.relationship == "sister"


async def test_learning_from_a_memory_deleted_since_its_add_creates_nobody(backend: Backend) -> None:
    # Extraction learns a fact's people in a write after the fact's own: a memory deleted in
    # between (memory.delete, or forget_person deleting what is about Tom) teaches nothing, so
    # the person the user forgot is not created again from it.
    await remember(backend, "My wife Sarah loves jazz")
    record, _ = await backend.memories.add(note("My boss Tom plays golf"))
    assert await backend.memories.delete(ALICE, record.id) == record.id
    learned = await backend.people.learn("alice", record.id, record.content, [], ("alice",), seen_by=ALICE)
    assert learned.linked == [] and not learned.changed
    assert [p.name for p in await backend.people.people_of("alice")] == ["Sarah"]
    assert await backend.people.find(ALICE, "Tom") is None
