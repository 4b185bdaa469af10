"""Supersession end to end through the socket, offline ([llm] provider = "none": the rules)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio

from memoryd.server.daemon import Daemon
from tests.wire import NdjsonPeer, call_error, call_ok

ALICE = {"user_id": "alice"}
BOB = {"user_id": "bob"}


async def add(peer: NdjsonPeer, who: dict[str, Any], content: str, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = await call_ok(peer, "memory.add", {**who, "content": content, **extra})
    return result


async def ids_of(peer: NdjsonPeer, method: str, params: dict[str, Any]) -> list[str]:
    return [m["id"] for m in await call_ok(peer, method, params)]


async def test_red_then_blue_search_returns_only_blue_and_history_shows_both(peer: NdjsonPeer) -> None:
    red = await add(peer, ALICE, "My favorite color is red")
    blue = await add(peer, ALICE, "My favorite color is blue")
    assert blue["superseded"] == [red["id"]] and red["superseded"] == []
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "favorite color"})
    assert [h["content"] for h in hits] == ["My favorite color is blue"]
    assert await ids_of(peer, "memory.list", ALICE) == [blue["id"]]

    chain = await call_ok(peer, "memory.history", {**ALICE, "memory_id": blue["short_id"]})
    assert [m["id"] for m in chain] == [red["id"], blue["id"]]
    old, new = chain
    assert old["superseded_by"] == blue["id"] and old["superseded_at"].endswith("Z")
    assert "favorite:color" in old["supersede_reason"]
    assert new["superseded_by"] is None and new["superseded_at"] is None
    # The same chain from the old end; get still reads the superseded memory by id.
    assert [m["id"] for m in await call_ok(peer, "memory.history", {**ALICE, "memory_id": red["id"]})] == [
        red["id"],
        blue["id"],
    ]
    got = await call_ok(peer, "memory.get", {**ALICE, "memory_id": red["id"]})
    assert got["superseded_by"] == blue["id"]


async def test_favorite_color_red_then_blue_in_the_words_of_the_users(peer: NdjsonPeer) -> None:
    red = await add(peer, ALICE, "Favorite color is red")
    blue = await add(peer, ALICE, "favorite color is blue")
    assert blue["superseded"] == [red["id"]]
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "favorite color"})
    assert [h["content"] for h in hits] == ["favorite color is blue"]
    chain = await call_ok(peer, "memory.history", {**ALICE, "memory_id": blue["id"]})
    assert [m["content"] for m in chain] == ["Favorite color is red", "favorite color is blue"]


async def test_what_sarah_says_of_herself_beats_what_tom_said_of_her_and_not_the_reverse(peer: NdjsonPeer) -> None:
    said_by = {"tom": {"source_username": "tom"}, "sarah": {"source_username": "sarah", "source_display_name": "Sarah"}}
    hearsay = await add(peer, ALICE, "Sarah lives in Boston", subjects=["Sarah"], **said_by["tom"])
    own_word = await add(peer, ALICE, "Sarah lives in Chicago", subjects=["Sarah"], **said_by["sarah"])
    assert own_word["superseded"] == [hearsay["id"]]
    later_hearsay = await add(peer, ALICE, "Sarah lives in Denver", subjects=["Sarah"], **said_by["tom"])
    assert later_hearsay["superseded"] == []
    listed = {m["content"]: m["trust"] for m in await call_ok(peer, "memory.list", ALICE)}
    assert listed == {"Sarah lives in Chicago": "fact", "Sarah lives in Denver": "hearsay"}


async def test_include_superseded_shows_old_versions_in_search_and_list(peer: NdjsonPeer) -> None:
    red = await add(peer, ALICE, "My favorite color is red")
    blue = await add(peer, ALICE, "My favorite color is blue")
    assert await ids_of(peer, "memory.list", {**ALICE, "include_superseded": True}) == [blue["id"], red["id"]]
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "favorite color", "include_superseded": True})
    assert {h["id"] for h in hits} == {red["id"], blue["id"]}
    assert {h["id"]: h["superseded_by"] for h in hits} == {red["id"]: blue["id"], blue["id"]: None}


async def test_a_chain_of_three_versions_is_oldest_first(peer: NdjsonPeer) -> None:
    first = await add(peer, ALICE, "I live in Berlin")
    second = await add(peer, ALICE, "I moved to Paris")
    third = await add(peer, ALICE, "I moved to Lisbon")
    assert second["superseded"] == [first["id"]] and third["superseded"] == [second["id"]]
    chain = await call_ok(peer, "memory.history", {**ALICE, "memory_id": second["id"]})
    assert [m["id"] for m in chain] == [first["id"], second["id"], third["id"]]


async def test_re_adding_an_old_value_makes_it_current_again(peer: NdjsonPeer) -> None:
    red = await add(peer, ALICE, "My favorite color is red")
    blue = await add(peer, ALICE, "My favorite color is blue")
    red_again = await add(peer, ALICE, "My favorite color is red")
    assert red_again["deduplicated"] is False and red_again["id"] != red["id"]
    assert red_again["superseded"] == [blue["id"]]
    assert await ids_of(peer, "memory.list", ALICE) == [red_again["id"]]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("My favorite color is red", []), ("Her favorite color is blue", ["Sarah"])),
        (("Her favorite color is blue", ["Sarah"]), ("My favorite color is red", [])),
        (("Sarah's favorite color is green", ["Sarah"]), ("Tom's favorite color is green", ["Tom"])),
        (("I like cats", []), ("I like dogs", [])),
        (("I am allergic to peanuts", []), ("I am allergic to shellfish", [])),
    ],
)
async def test_facts_that_can_both_be_true_coexist(
    peer: NdjsonPeer, first: tuple[str, list[str]], second: tuple[str, list[str]]
) -> None:
    a = await add(peer, ALICE, first[0], subjects=first[1])
    b = await add(peer, ALICE, second[0], subjects=second[1])
    assert b["superseded"] == []
    assert set(await ids_of(peer, "memory.list", ALICE)) == {a["id"], b["id"]}


async def test_supersession_stays_inside_a_scope(peer: NdjsonPeer) -> None:
    mine = await add(peer, ALICE, "My favorite color is red")
    group = await add(peer, {**ALICE, "chat_id": "c1"}, "My favorite color is blue", shared=True)
    bobs = await add(peer, BOB, "My favorite color is green")
    assert group["superseded"] == [] and bobs["superseded"] == []
    assert set(await ids_of(peer, "memory.list", {**ALICE, "chat_id": "c1"})) == {mine["id"], group["id"]}


async def test_explicit_supersedes_replaces_a_visible_memory(peer: NdjsonPeer) -> None:
    old = await add(peer, ALICE, "Standup is at 9:30")
    new = await add(peer, ALICE, "Standup moved to 10:00 on Mondays", supersedes=old["short_id"])
    assert new["superseded"] == [old["id"]]
    chain = await call_ok(peer, "memory.history", {**ALICE, "memory_id": new["id"]})
    assert [m["id"] for m in chain] == [old["id"], new["id"]]
    assert chain[0]["supersede_reason"] == "replaced on request (supersedes)"


async def test_supersedes_of_what_the_caller_cannot_see_is_not_found_and_writes_nothing(peer: NdjsonPeer) -> None:
    bobs = await add(peer, BOB, "Bob's locker code is in the drawer")
    other_chat = await add(peer, {**BOB, "chat_id": "c2"}, "The team meets Fridays", shared=True)
    for target in (bobs["id"], other_chat["id"], "01ARZ3NDEKTSV4RRFFQ69G5FAV"):
        for caller in (ALICE, {**ALICE, "chat_id": "c1"}):
            error = await call_error(
                peer, "memory.add", {**caller, "content": "replacement text", "supersedes": target}
            )
            assert error["code"] == -32001 and error["data"]["field"] == "supersedes"
    assert await ids_of(peer, "memory.list", ALICE) == []
    assert await ids_of(peer, "memory.list", BOB) == [bobs["id"]]
    assert await ids_of(peer, "memory.list", {**BOB, "chat_id": "c2"}) == [other_chat["id"], bobs["id"]]


async def test_supersedes_refuses_another_scope_and_an_old_version(peer: NdjsonPeer) -> None:
    group = await add(peer, {**ALICE, "chat_id": "c1"}, "The team meets Fridays", shared=True)
    error = await call_error(
        peer, "memory.add", {**ALICE, "chat_id": "c1", "content": "Team meets Mondays", "supersedes": group["id"]}
    )
    assert error["code"] == -32602 and error["data"]["field"] == "supersedes"
    assert "scope" in error["data"]["reason"]
    red = await add(peer, ALICE, "My favorite color is red")
    await add(peer, ALICE, "My favorite color is blue")
    error = await call_error(peer, "memory.add", {**ALICE, "content": "Favorite: green", "supersedes": red["id"]})
    assert error["code"] == -32602 and "already superseded" in error["data"]["reason"]
    error = await call_error(peer, "memory.add", {**ALICE, "content": "x", "supersedes": "not-an-id"})
    assert error["code"] == -32602 and error["data"]["field"] == "supersedes"


async def test_key_upsert_newer_wins_for_the_same_key_subjects_and_scope(peer: NdjsonPeer) -> None:
    black = await add(peer, ALICE, "Takes coffee black", key="coffee")
    milk = await add(peer, ALICE, "Takes coffee with oat milk", key="coffee")
    sarahs = await add(peer, ALICE, "Takes coffee with sugar", key="coffee", subjects=["Sarah"])
    bobs = await add(peer, BOB, "Takes coffee black", key="coffee")
    assert milk["superseded"] == [black["id"]] and sarahs["superseded"] == [] and bobs["superseded"] == []
    listed = await call_ok(peer, "memory.list", ALICE)
    assert {m["id"]: m["key"] for m in listed} == {milk["id"]: "coffee", sarahs["id"]: "coffee"}
    assert await ids_of(peer, "memory.list", BOB) == [bobs["id"]]


async def test_history_never_leaks_another_users_or_chats_memory(peer: NdjsonPeer) -> None:
    red = await add(peer, ALICE, "My favorite color is red")
    await add(peer, ALICE, "My favorite color is blue")
    g1 = await add(peer, {**ALICE, "chat_id": "c1"}, "Our meeting room is A", shared=True)
    g2 = await add(peer, {**ALICE, "chat_id": "c1"}, "Our meeting room is B now", shared=True, supersedes=g1["id"])
    for caller, memory_id in [
        (BOB, red["id"]),
        ({**BOB, "chat_id": "c2"}, g1["id"]),
        ({**ALICE, "chat_id": "c2"}, g2["id"]),
        (ALICE, g2["id"]),
    ]:
        error = await call_error(peer, "memory.history", {**caller, "memory_id": memory_id})
        assert error["code"] == -32001 and error["data"]["field"] == "memory_id"
    # A member of the chat sees the group chain, and never alice's personal memories with it.
    chain = await call_ok(peer, "memory.history", {**BOB, "chat_id": "c1", "memory_id": g2["id"]})
    assert [m["id"] for m in chain] == [g1["id"], g2["id"]]


async def test_gc_removes_superseded_memories_after_retention(daemon: Daemon, peer: NdjsonPeer) -> None:
    red = await add(peer, ALICE, "My favorite color is red")
    blue = await add(peer, ALICE, "My favorite color is blue")
    assert daemon.store is not None
    lifecycle = daemon.store.lifecycle
    kept = await trio.to_thread.run_sync(lambda: lifecycle.gc(retention_ms=3_600_000))
    assert kept.purged == 0
    report = await trio.to_thread.run_sync(lambda: lifecycle.gc(retention_ms=0))
    assert report.purged_by_reason == Counter(superseded=1)
    error = await call_error(peer, "memory.get", {**ALICE, "memory_id": red["id"]})
    assert error["code"] == -32001
    chain = await call_ok(peer, "memory.history", {**ALICE, "memory_id": blue["id"]})
    assert [m["id"] for m in chain] == [blue["id"]]


async def test_the_owners_people_make_my_wife_and_sarah_one_subject(peer: NdjsonPeer) -> None:
    await add(peer, ALICE, "My wife's name is Sarah")
    red = await add(peer, ALICE, "My wife's favorite color is red")
    blue = await add(peer, ALICE, "Sarah's favorite color is blue")
    assert blue["superseded"] == [red["id"]]
    bobs = await add(peer, BOB, "Sarah's favorite color is green")  # bob knows no Sarah of alice's
    assert bobs["superseded"] == []


async def test_concurrent_adds_commit_together_and_a_refused_one_fails_alone(daemon: Daemon) -> None:
    """Adds that arrive together share a write transaction (store/write_batch.py): every one
    is stored with its own id, short id and people, and a refused ``supersedes`` among them
    leaves nothing behind and fails only its own call."""
    results: dict[int, dict[str, Any]] = {}

    async def one(n: int) -> None:
        client = await NdjsonPeer.connect(daemon.config.socket_path)
        params: dict[str, Any] = {**ALICE, "content": f"My colleague Dana{'x' * n} likes tea, note {n}"}
        if n == 7:
            params["supersedes"] = "0000000000"  # nothing visible has this id
        results[n] = await client.call("memory.add", params)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(one, n)
    assert results[7]["error"]["code"] == -32001 and results[7]["error"]["data"]["field"] == "supersedes"
    stored = [results[n]["result"] for n in range(20) if n != 7]
    assert len({added["id"] for added in stored}) == 19
    assert all(added["id"].startswith(added["short_id"]) for added in stored)
    assert daemon.store.small_writes.writes == 20  # type: ignore[union-attr]  # all through the batcher
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    listed = await call_ok(peer, "memory.list", {**ALICE, "limit": 50})
    assert sorted(record["id"] for record in listed) == sorted(added["id"] for added in stored)
    assert not any("note 7" in record["content"] for record in listed)
    people = await call_ok(peer, "person.list", ALICE)
    assert sorted(person["name"] for person in people) == sorted(f"Dana{'x' * n}" for n in range(20) if n != 7)


async def test_a_note_with_the_same_key_supersedes_through_the_socket(peer: NdjsonPeer) -> None:
    old = await add(peer, ALICE, "Phone number: 555-0142")
    work = await add(peer, ALICE, "Work phone number: 555-0777")
    new = await add(peer, ALICE, "Phone number: 555-0199")
    assert new["superseded"] == [old["id"]] and work["superseded"] == []
    assert sorted(await ids_of(peer, "memory.list", {**ALICE})) == sorted([work["id"], new["id"]])
    reason = (await call_ok(peer, "memory.get", {**ALICE, "memory_id": old["id"]}))["supersede_reason"]
    assert "phone" in reason and "555-0142" in reason  # a note of a named key: the phone number


async def test_now_before_the_verb_and_new_before_the_key_supersede_through_the_socket(peer: NdjsonPeer) -> None:
    car = await add(peer, ALICE, "I drive a Toyota Corolla")
    honda = await add(peer, ALICE, "I now drive a Honda Accord")
    assert honda["superseded"] == [car["id"]]
    phone = await add(peer, ALICE, "My phone number is 555-1234")
    work = await add(peer, ALICE, "My new work phone number is 555-4444")
    new = await add(peer, ALICE, "My new phone number is 555-9876")
    assert work["superseded"] == [] and new["superseded"] == [phone["id"]]


async def test_a_verb_object_statement_supersedes_only_when_it_says_it_changed(peer: NdjsonPeer) -> None:
    violin = await add(peer, ALICE, "Kenji plays the violin")
    piano = await add(peer, ALICE, "Kenji plays the piano")
    assert piano["superseded"] == []  # both can be true
    car = await add(peer, ALICE, "Ren drives a Honda Civic")
    tesla = await add(peer, ALICE, "Ren sold the Civic and drives a Tesla Model 3 now")
    assert tesla["superseded"] == [car["id"]]
    assert violin["id"] in await ids_of(peer, "memory.list", {**ALICE})


async def test_shapes_of_change_supersede_through_the_socket(peer: NdjsonPeer) -> None:
    email = await add(peer, ALICE, "My email is sam@old.example")
    reach = await add(peer, ALICE, "You can reach me at sam@new.example now")
    engaged = await add(peer, ALICE, "I'm engaged to Marco")
    married = await add(peer, ALICE, "Marco and I got married in June")
    standup = await add(peer, ALICE, "My standup is at 9:30")
    monday = await add(peer, ALICE, "Standup is on Mondays")  # a day, not a new time
    moved = await add(peer, ALICE, "Standup moved to 10:00")
    assert reach["superseded"] == [email["id"]] and married["superseded"] == [engaged["id"]]
    assert monday["superseded"] == [] and moved["superseded"] == [standup["id"]]
