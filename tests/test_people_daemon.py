"""People, the about filter and the people retriever, forget_person: offline, through the socket."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd.server.daemon import Daemon
from tests.store_helpers import sql
from tests.wire import NdjsonPeer, call_error, call_ok

ALICE = {"user_id": "alice"}


async def add(peer: NdjsonPeer, content: str, **params: Any) -> str:
    params = {**ALICE, **params}
    memory_id: str = (await call_ok(peer, "memory.add", {**params, "content": content}))["id"]
    return memory_id


async def test_my_wife_finds_sarahs_italian_food_at_rank_one(peer: NdjsonPeer) -> None:
    await add(peer, "My wife's name is Sarah")
    food = await add(peer, "Sarah likes Italian food")
    await add(peer, "I like hiking in the Alps")
    await add(peer, "The office coffee machine is broken")
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "what does my wife like?"})
    assert hits[0]["id"] == food
    assert hits[0]["about"] == ["Sarah"]


async def test_the_relationship_statement_makes_one_person_with_its_alias(peer: NdjsonPeer) -> None:
    first = await add(peer, "My wife's name is Sarah")
    await add(peer, "sarah likes Italian food", subjects=["sarah"])
    restated = await call_ok(peer, "memory.add", {**ALICE, "content": "Sarah is my wife"})
    # The restatement supersedes "My wife's name is Sarah" (same attribute, same subject), so
    # two of the three memories about her are live.
    assert restated["superseded"] == [first]
    people = await call_ok(peer, "person.list", ALICE)
    assert [(p["name"], p["relationship"], p["memories"]) for p in people] == [("Sarah", "wife", 2)]
    assert "my wife" in people[0]["aliases"]
    for phrase in ("my wife", "wife", "Sarah", "sarah", people[0]["id"]):
        got = await call_ok(peer, "person.get", {**ALICE, "name": phrase})
        assert got["id"] == people[0]["id"] and len(got["memories"]) == 2


async def test_a_new_name_for_a_one_at_a_time_relationship_merges(peer: NdjsonPeer) -> None:
    await add(peer, "My boss Tom wants the report on Friday")
    await add(peer, "My boss's name is Thomas")
    people = await call_ok(peer, "person.list", ALICE)
    assert len(people) == 1 and people[0]["name"] == "Tom" and "Thomas" in people[0]["aliases"]
    # Sons are several at once: two names, two people.
    await add(peer, "My son Leo plays chess")
    await add(peer, "My son Max plays football")
    names = {p["name"] for p in await call_ok(peer, "person.list", ALICE)}
    assert names == {"Tom", "Leo", "Max"}


async def test_later_memories_naming_her_are_linked_and_about_filters(peer: NdjsonPeer) -> None:
    await add(peer, "Sarah is my wife")
    birthday = await add(peer, "Sarah's birthday is on May 3rd")
    mine = await add(peer, "I work at Acme")
    by_subject = await add(peer, "She is allergic to cats", subjects=["Sarah"])
    listed = await call_ok(peer, "memory.list", {**ALICE, "about": "my wife"})
    assert {m["id"] for m in listed} >= {birthday, by_subject} and mine not in {m["id"] for m in listed}
    assert all(m["about"] == ["Sarah"] for m in listed)
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "birthday cats work", "about": "Sarah"})
    assert mine not in {h["id"] for h in hits} and {birthday, by_subject} <= {h["id"] for h in hits}
    assert await call_ok(peer, "memory.search", {**ALICE, "query": "work", "about": "Nobody"}) == []
    assert await call_ok(peer, "memory.list", {**ALICE, "about": "Nobody"}) == []
    general = await call_ok(peer, "memory.get", {**ALICE, "memory_id": mine})
    assert general["about"] == []


async def test_subjects_make_people_and_unknown_about_falls_back_to_subjects(peer: NdjsonPeer) -> None:
    await add(peer, "Loves jazz", subjects=["Bob Marley"])
    people = await call_ok(peer, "person.list", ALICE)
    assert [p["name"] for p in people] == ["Bob Marley"]
    # A relationship with nobody behind it and the owner's own name create nobody.
    await add(peer, "Is tall", subjects=["my sister", "alice"])
    assert len(await call_ok(peer, "person.list", ALICE)) == 1


async def test_merge_and_alias(peer: NdjsonPeer) -> None:
    await add(peer, "Bobby likes chess", subjects=["Bobby"])
    await add(peer, "Robert is my brother")
    merged = await call_ok(peer, "person.merge", {**ALICE, "from": "Bobby", "into": "my brother"})
    assert merged["name"] == "Robert" and "Bobby" in merged["aliases"]
    got = await call_ok(peer, "person.get", {**ALICE, "name": "bobby"})
    assert {m["content"] for m in got["memories"]} == {"Bobby likes chess", "Robert is my brother"}
    aliased = await call_ok(peer, "person.alias", {**ALICE, "name": "Robert", "alias": "Rob"})
    assert "Rob" in aliased["aliases"]
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "what does Rob like?"})
    assert hits[0]["content"] == "Bobby likes chess"


@pytest.mark.parametrize(
    ("method", "params", "code", "field"),
    [
        ("person.get", {"name": "Nobody"}, -32001, "name"),
        ("person.merge", {"from": "Nobody", "into": "Robert"}, -32001, "from"),
        ("person.merge", {"from": "Robert", "into": "Nobody"}, -32001, "into"),
        ("person.merge", {"from": "Robert", "into": "my brother"}, -32602, "into"),
        ("person.alias", {"name": "Nobody", "alias": "x"}, -32001, "name"),
        ("person.alias", {"name": "Robert", "alias": "Anna"}, -32602, "alias"),
        ("person.alias", {"name": "Robert", "alias": ""}, -32602, "alias"),
        ("memory.forget_person", {}, -32602, "person"),
        ("memory.forget_person", {"person": "Nobody"}, -32001, "person"),
        ("memory.forget_person", {"person_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, -32001, "person_id"),
        ("person.get", {}, -32602, "name"),
        ("memory.search", {"query": "x", "about": ""}, -32602, "about"),
    ],
)
async def test_bad_person_calls_name_the_field(
    peer: NdjsonPeer, method: str, params: dict[str, Any], code: int, field: str
) -> None:
    await add(peer, "Robert is my brother")
    await add(peer, "Anna is my sister")
    error = await call_error(peer, method, {**ALICE, **params})
    assert error["code"] == code and error["data"]["field"] == field, error


async def test_forget_person_removes_what_it_should_and_nothing_else(peer: NdjsonPeer) -> None:
    await add(peer, "My wife's name is Sarah")
    await add(peer, "Sarah likes Italian food")
    await add(peer, "My wife is allergic to cats")
    keep = {await add(peer, "I like hiking"), await add(peer, "Tom is my boss"), await add(peer, "Tom likes golf")}
    group_elsewhere = await add(peer, "Sarah brings the cake", chat_id="c1", shared=True)
    result = await call_ok(peer, "memory.forget_person", {**ALICE, "person": "my wife"})
    assert result["person"]["name"] == "Sarah" and result["person_deleted"] is True
    assert result["archived_count"] == 3 == len(result["deleted"])
    assert {m["id"] for m in await call_ok(peer, "memory.list", ALICE)} == keep
    assert [p["name"] for p in await call_ok(peer, "person.list", ALICE)] == ["Tom"]
    # A chat's group memory was not visible from the private call: it stays, for that chat.
    assert group_elsewhere in {m["id"] for m in await call_ok(peer, "memory.list", {**ALICE, "chat_id": "c1"})}
    assert await call_ok(peer, "memory.search", {**ALICE, "query": "Italian food"}) == []


async def test_forget_person_is_audited_by_ids_without_contents(daemon: Daemon, peer: NdjsonPeer) -> None:
    await add(peer, "My wife's name is Sarah")
    food = await add(peer, "Sarah likes Italian food")
    result = await call_ok(peer, "memory.forget_person", {**ALICE, "person": "Sarah"})
    events = sql(daemon.config.db_path, "SELECT memory_id, event, actor, detail FROM events ORDER BY at_ms, event")
    deleted = {memory_id for memory_id, event, _, detail in events if event == "deleted" and "forget_person" in detail}
    assert food in deleted and deleted == set(result["deleted"])
    (forgotten,) = [event for event in events if event[1] == "person_forgotten"]
    assert forgotten[0] == result["person"]["id"] and forgotten[2] == "alice"
    assert all("Italian" not in str(event) and "Sarah" not in str(event[3]) for event in events)


async def test_forget_person_with_ashs_params_can_keep_the_person(peer: NdjsonPeer) -> None:
    await add(peer, "Tom is my boss")
    person_id = (await call_ok(peer, "person.list", ALICE))[0]["id"]
    result = await call_ok(
        peer, "memory.forget_person", {**ALICE, "person_id": person_id, "delete_person_record": False}
    )
    assert result["archived_count"] == 1 and result["person_deleted"] is False
    assert [p["memories"] for p in await call_ok(peer, "person.list", ALICE)] == [0]


async def test_with_the_local_model_my_wife_still_finds_sarah_first(local_peer: NdjsonPeer) -> None:
    peer = local_peer
    await add(peer, "My wife's name is Sarah")
    food = await add(peer, "Sarah likes Italian food")
    for text in (
        "I like hiking in the Alps",
        "My favourite food is sushi",
        "I love my dog Rex",
        "Tom likes golf",
        "My wife and I met in Rome",
    ):
        await add(peer, text)
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "what does my wife like?"})
    assert hits[0]["id"] == food and hits[0]["about"] == ["Sarah"]
