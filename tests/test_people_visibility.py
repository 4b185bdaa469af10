"""People, forget_person, context and summary under the visibility rule: the attacks of
tests/test_store_visibility.py, through the socket.

alice knows Sarah (her wife).  She has personal memories about Sarah, a group memory about
Sarah in chat c1, and one in chat c2.  bob is in c1 with her; mallory is nobody's.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.wire import NdjsonPeer, call_error, call_ok

ALICE = {"user_id": "alice"}
ALICE_C1 = {"user_id": "alice", "chat_id": "c1"}
ALICE_C2 = {"user_id": "alice", "chat_id": "c2"}
BOB_C1 = {"user_id": "bob", "chat_id": "c1"}
MALLORY = {"user_id": "mallory", "chat_id": "c3"}


@pytest.fixture
async def ids(peer: NdjsonPeer) -> dict[str, str]:
    async def add(who: dict[str, str], content: str, **params: Any) -> str:
        memory_id: str = (await call_ok(peer, "memory.add", {**who, **params, "content": content}))["id"]
        return memory_id

    return {
        "wife": await add(ALICE, "My wife's name is Sarah"),
        "food": await add(ALICE, "Sarah likes Italian food"),
        "c1 cake": await add(ALICE_C1, "Sarah brings the cake on Friday", shared=True),
        "c2 wine": await add(ALICE_C2, "Sarah brings the wine on Saturday", shared=True),
        "bob sarah": await add(BOB_C1, "Sarah is my neighbour, she works in accounting"),
    }


async def error_code(peer: NdjsonPeer, method: str, params: dict[str, Any]) -> int:
    code: int = (await call_error(peer, method, params))["code"]
    return code


async def test_another_users_people_are_invisible(peer: NdjsonPeer, ids: dict[str, str]) -> None:
    alices = await call_ok(peer, "person.list", ALICE)
    sarah_id = next(p["id"] for p in alices if p["name"] == "Sarah")
    for caller in (BOB_C1, MALLORY):
        theirs = await call_ok(peer, "person.list", caller)
        assert sarah_id not in {p["id"] for p in theirs}
        assert {p["name"] for p in theirs} == ({"Sarah"} if caller is BOB_C1 else set())  # bob's own Sarah
        for phrase in ("my wife", sarah_id):
            assert await error_code(peer, "person.get", {**caller, "name": phrase}) == -32001
        assert await error_code(peer, "person.alias", {**caller, "name": sarah_id, "alias": "x"}) == -32001
        assert await error_code(peer, "person.merge", {**caller, "from": sarah_id, "into": sarah_id}) == -32001
        assert await error_code(peer, "memory.forget_person", {**caller, "person_id": sarah_id}) == -32001
    # bob's Sarah is bob's: created from his memory, linked to it only.
    bobs = await call_ok(peer, "person.get", {**BOB_C1, "name": "Sarah"})
    assert [m["id"] for m in bobs["memories"]] == [ids["bob sarah"]] and bobs["id"] != sarah_id
    assert {m["id"] for m in (await call_ok(peer, "person.get", {**ALICE, "name": "Sarah"}))["memories"]} == {
        ids["wife"],
        ids["food"],
    }


async def test_person_get_shows_only_the_current_chats_group_memories(peer: NdjsonPeer, ids: dict[str, str]) -> None:
    def of(person: dict[str, Any]) -> set[str]:
        return {m["id"] for m in person["memories"]}

    personal = {ids["wife"], ids["food"]}
    assert of(await call_ok(peer, "person.get", {**ALICE, "name": "Sarah"})) == personal
    assert of(await call_ok(peer, "person.get", {**ALICE_C1, "name": "Sarah"})) == personal | {ids["c1 cake"]}
    assert of(await call_ok(peer, "person.get", {**ALICE_C2, "name": "Sarah"})) == personal | {ids["c2 wine"]}
    counts = {p["name"]: p["memories"] for p in await call_ok(peer, "person.list", ALICE_C1)}
    assert counts["Sarah"] == 3


async def test_search_and_list_about_obey_visibility(peer: NdjsonPeer, ids: dict[str, str]) -> None:
    def of(records: list[dict[str, Any]]) -> set[str]:
        return {r["id"] for r in records}

    query = {"query": "what does my wife bring?", "limit": 50}
    assert ids["c2 wine"] not in of(await call_ok(peer, "memory.search", {**ALICE_C1, **query}))
    assert of(await call_ok(peer, "memory.list", {**ALICE_C2, "about": "my wife"})) == {
        ids["wife"],
        ids["food"],
        ids["c2 wine"],
    }
    # bob sees the c1 group memory, but alice's people never name it for him.
    bob_hits = await call_ok(peer, "memory.search", {**BOB_C1, "query": "cake", "limit": 50})
    assert [(h["id"], h["about"]) for h in bob_hits] == [(ids["c1 cake"], [])]
    assert await call_ok(peer, "memory.search", {**MALLORY, "query": "what does my wife like?"}) == []
    assert await call_ok(peer, "memory.list", {**MALLORY, "about": "Sarah"}) == []


async def test_forget_person_touches_only_what_the_caller_sees(peer: NdjsonPeer, ids: dict[str, str]) -> None:
    assert await error_code(peer, "memory.forget_person", {**BOB_C1, "person": "my wife"}) == -32001
    result = await call_ok(peer, "memory.forget_person", {**ALICE_C1, "person": "Sarah"})
    assert set(result["deleted"]) == {ids["wife"], ids["food"], ids["c1 cake"]}
    assert ids["c2 wine"] in {m["id"] for m in await call_ok(peer, "memory.list", ALICE_C2)}
    assert ids["bob sarah"] in {m["id"] for m in await call_ok(peer, "memory.list", BOB_C1)}
    assert (await call_ok(peer, "person.get", {**BOB_C1, "name": "Sarah"}))["memories"]


async def test_summary_and_context_never_cross_chats_or_users(peer: NdjsonPeer, ids: dict[str, str]) -> None:
    # Asked first from c1, so a cache keyed per user alone would leak the cake into c2.
    in_c1 = (await call_ok(peer, "memory.summary", ALICE_C1))["summary"]
    assert "cake" in in_c1 and "wine" not in in_c1
    in_c2 = (await call_ok(peer, "memory.summary", ALICE_C2))["summary"]
    assert "wine" in in_c2 and "cake" not in in_c2
    private = (await call_ok(peer, "memory.summary", ALICE))["summary"]
    assert "cake" not in private and "wine" not in private and "Italian" in private
    bobs = (await call_ok(peer, "memory.summary", BOB_C1))["summary"]
    assert "Italian" not in bobs and "cake" in bobs and "Sarah (wife)" not in bobs
    assert (await call_ok(peer, "memory.summary", MALLORY))["summary"] == ""

    context = await call_ok(peer, "memory.context", {**ALICE_C2, "message": "what does my wife bring?", "limit": 50})
    assert "cake" not in context["text"] and "wine" in context["text"]
    assert ids["c1 cake"] not in {m["id"] for m in context["memories"]}
    bob = await call_ok(peer, "memory.context", {**BOB_C1, "message": "what does my wife like?", "limit": 50})
    assert "Italian" not in bob["text"] and bob["people"] == []
