"""One user's people cannot slow everyone: subjects resolve by indexed look-ups, and both the
subjects of one memory and the people of one owner are bounded (configurable, -32602 past it)."""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.knowledge import KnownPerson, PersonIndex, RelationshipFact, merge_target, resolve_person
from memoryd.server.daemon import Daemon
from tests.conftest import make_config
from tests.wire import NdjsonPeer, call_error, call_ok

ALICE = {"user_id": "alice"}
BOB = {"user_id": "bob"}


async def start(short_tmp: Path, nursery: trio.Nursery, **limits: Any) -> NdjsonPeer:
    instance = Daemon(make_config(short_tmp, limits=limits))
    await nursery.start(instance.run)
    return await NdjsonPeer.connect(instance.config.socket_path)


async def test_subjects_past_the_configured_bound_are_refused_naming_the_field(
    short_tmp: Path, nursery: trio.Nursery
) -> None:
    peer = await start(short_tmp, nursery, max_subjects_per_memory=3)
    error = await call_error(peer, "memory.add", {**ALICE, "content": "met them", "subjects": ["A", "B", "C", "D"]})
    assert error["code"] == -32602 and error["data"]["field"] == "subjects"
    assert "max_subjects_per_memory" in error["data"]["reason"]
    await call_ok(peer, "memory.add", {**ALICE, "content": "met them", "subjects": ["A", "B", "C"]})


async def test_people_past_the_owner_bound_are_refused_and_nothing_is_stored(
    short_tmp: Path, nursery: trio.Nursery
) -> None:
    peer = await start(short_tmp, nursery, max_people_per_owner=5)
    await call_ok(peer, "memory.add", {**ALICE, "content": "team lunch", "subjects": ["Ann", "Ben", "Cid", "Dan"]})
    # One more person fits; the subject after it would be the sixth.
    error = await call_error(peer, "memory.add", {**ALICE, "content": "dinner", "subjects": ["Ann", "Eve", "Fay"]})
    assert error["code"] == -32602 and error["data"]["field"] == "subjects[2]"
    assert "max_people_per_owner" in error["data"]["reason"]
    # The refused add stored nothing: no memory, and Eve was not created either.
    assert [m["content"] for m in await call_ok(peer, "memory.list", ALICE)] == ["team lunch"]
    names = sorted(p["name"] for p in await call_ok(peer, "person.list", ALICE))
    assert names == ["Ann", "Ben", "Cid", "Dan"]
    # Known people still resolve, and the last free place can still be taken.
    await call_ok(peer, "memory.add", {**ALICE, "content": "coffee", "subjects": ["ann", "Eve"]})
    error = await call_error(peer, "memory.add", {**ALICE, "content": "tea", "subjects": ["Gus"]})
    assert error["data"]["field"] == "subjects[0]"
    # Another owner has a bound of their own.
    await call_ok(peer, "memory.add", {**BOB, "content": "tea", "subjects": ["Gus"]})


async def test_people_changed_elsewhere_are_seen_by_the_next_add(short_tmp: Path, nursery: trio.Nursery) -> None:
    """The writer keeps each owner's people indexed between adds; a merge or an alias made
    through another path must not leave it resolving names to what was."""
    peer = await start(short_tmp, nursery)
    await call_ok(peer, "memory.add", {**ALICE, "content": "lunch", "subjects": ["Sarah Klein"]})
    await call_ok(peer, "memory.add", {**ALICE, "content": "call", "subjects": ["Sari"]})
    await call_ok(peer, "person.merge", {**ALICE, "from": "Sari", "into": "Sarah Klein"})
    await call_ok(peer, "person.alias", {**ALICE, "name": "Sarah Klein", "alias": "Sunny"})
    await call_ok(peer, "memory.add", {**ALICE, "content": "walk", "subjects": ["Sari", "Sunny"]})
    people = await call_ok(peer, "person.list", ALICE)
    assert [p["name"] for p in people] == ["Sarah Klein"]
    assert people[0]["memories"] == 3


def _random_people(count: int, seed: int) -> list[KnownPerson]:
    rng = random.Random(seed)
    first = ["Sarah", "Tom", "Ann", "Ben", "Li", "Omar", "Eve"]
    rels = [None, None, "wife", "son", "boss", "friend", "dog"]
    people = []
    for index in range(count):
        name = f"{rng.choice(first)} {''.join(rng.choice(string.ascii_lowercase) for _ in range(3)).title()}"
        if rng.random() < 0.3:
            name = rng.choice(first)
        aliases = tuple(rng.sample(["Sunny", "my wife", "Doc", "sarah", "Tommy", "my boss"], rng.randint(0, 2)))
        people.append(KnownPerson(str(index), name, aliases, rng.choice(rels)))
    return people


@pytest.mark.parametrize("seed", range(20))
def test_the_index_answers_as_the_linear_resolution_does(seed: int) -> None:
    people = _random_people(random.Random(seed).randint(0, 12), seed)
    index = PersonIndex(people)
    phrases = [
        "Sarah",
        "sarah's",
        "Tom",
        "my wife",
        "wife",
        "the boss",
        "my son",
        "Doc",
        "Sunny",
        "Omar",
        "my dog",
        "nobody",
        *(p.name for p in people),
        *(p.name.upper() for p in people),
    ]
    for phrase in phrases:
        assert index.resolve(phrase) == resolve_person(phrase, people), phrase
    for fact in [
        RelationshipFact("Sara", "wife", ("my wife",)),
        RelationshipFact("Zed", "son", ("my son",)),
        RelationshipFact("Tom", "boss", ("my boss",)),
    ]:
        assert index.merge_target(fact) == merge_target(fact, people)
    # Leaving people out (the ones a caller may not know of) answers as the list without them.
    for hidden in ({p.key for p in people[:1]}, {p.key for p in people[::2]}, {p.key for p in people[1::3]}):
        rest = [p for p in people if p.key not in hidden]
        for phrase in phrases:
            assert index.resolve(phrase, hidden) == resolve_person(phrase, rest), (phrase, hidden)
        for fact in [RelationshipFact("Sara", "wife", ("my wife",)), RelationshipFact("Tom", "boss", ("my boss",))]:
            assert index.merge_target(fact, hidden) == merge_target(fact, rest)


async def test_at_the_bound_a_person_hidden_from_the_chat_counts_as_new_and_the_refusal_says_nothing_of_them(
    short_tmp: Path, nursery: trio.Nursery
) -> None:
    peer = await start(short_tmp, nursery, max_people_per_owner=2)
    private = {**ALICE, "chat_id": "p1", "chat_type": "private"}
    group = {**ALICE, "chat_id": "g1", "chat_type": "group"}
    await call_ok(peer, "memory.add", {**private, "content": "therapy notes", "subjects": ["Anna"]})
    await call_ok(peer, "memory.add", {**group, "content": "team lunch", "subjects": ["Ben"]})
    # The group cannot know Anna: "Anna" there would be a new person, past the bound, and the
    # refusal names the first subject, exactly as for a name nobody has.
    for subjects in (["Anna", "Zed"], ["Yan", "Zed"], ["Anna", "Ben"]):
        error = await call_error(peer, "memory.add", {**group, "content": "dinner", "subjects": subjects})
        assert error["code"] == -32602 and error["data"]["field"] == "subjects[0]", (subjects, error)
    # The private chat knows Anna: her name fits, and links to her.
    await call_ok(peer, "memory.add", {**private, "content": "session two", "subjects": ["Anna"]})
    assert [p["name"] for p in await call_ok(peer, "person.list", group)] == ["Ben"]
    assert sorted(p["name"] for p in await call_ok(peer, "person.list", private)) == ["Anna", "Ben"]
