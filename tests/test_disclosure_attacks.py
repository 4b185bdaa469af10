"""What a chat may not see stays unseen through every method, in trust and token mode alike.

One user has a group chat G1, a private chat P1 and another group G2 (and Bob shares G1).  Each
test plants something in a place, then reads everything a method can return from a place that
may not see it (memories, ids, people, counts, prompt text, supersession metadata) and checks
that neither the hidden text nor the hidden id appears anywhere in the replies; and, from a
place that may see it, that it is there (so the attack is not answered by an empty store).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.server.daemon import Daemon
from memoryd_client import mint_token
from tests.conftest import make_config
from tests.fake_llm import Answer, FakeLlm
from tests.wire import NdjsonPeer, call_error, call_ok

SECRET = "5f1e0c3a9b7d2e4f6a8c0b1d3e5f7a9c1b3d5e7f9a0c2e4f6a8b0d2f4e6a8c0b"


class World:
    """A daemon in one auth mode, and how to call it as a user in a chat."""

    def __init__(self, mode: str, peer: NdjsonPeer, fake: FakeLlm) -> None:
        self.mode = mode
        self.peer = peer
        self.fake = fake

    def who(self, user: str, chat: str | None, chat_type: str | None, **routing: str) -> dict[str, Any]:
        if self.mode == "token":
            return {"context_token": mint_token(SECRET, user, chat, chat_type=chat_type, **routing)}
        params: dict[str, Any] = {"user_id": user, **routing}
        if chat is not None:
            params["chat_id"] = chat
        if chat_type is not None:
            params["chat_type"] = chat_type
        return params

    async def ok(self, method: str, who: dict[str, Any], **params: Any) -> Any:
        return await call_ok(self.peer, method, {**who, **params})

    async def code(self, method: str, who: dict[str, Any], **params: Any) -> int:
        code: int = (await call_error(self.peer, method, {**who, **params}))["code"]
        return code

    async def everything(self, who: dict[str, Any], *, ids: list[str], names: list[str], query: str) -> str:
        """Every reply a caller can get that holds memories, people, ids or counts, as one text."""
        replies: list[Any] = []
        for superseded in (False, True):
            replies.append(await self.ok("memory.list", who, limit=1000, include_superseded=superseded))
            replies.append(await self.ok("memory.search", who, query=query, limit=100, include_superseded=superseded))
        replies.append(await self.ok("memory.list", who, limit=1000, include_expired=True))
        replies.append(await self.ok("memory.context", who, message=query))
        replies.append(await self.ok("memory.summary", who))
        people = await self.ok("person.list", who)
        replies.append(people)
        for person in people:
            replies.append(await self.ok("person.get", who, name=person["id"]))
        for memory_id in ids:
            for method in ("memory.get", "memory.history"):
                error = await call_error(self.peer, method, {**who, "memory_id": memory_id})
                replies.append(error)
        for name in names:
            replies.append(await self.ok("memory.search", who, query=query, about=name))
            replies.append(await self.ok("memory.list", who, about=name))
            replies.append(await call_error(self.peer, "person.get", {**who, "name": name}))
        return json.dumps(replies).casefold()


@pytest.fixture(params=["trust", "token", "token-postgres"])
async def world(
    request: pytest.FixtureRequest, short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> AsyncIterator[World]:
    """A daemon per auth mode; ``token-postgres``: token mode on the PostgreSQL backend (the
    same attacks, the other engine)."""
    mode = "token" if request.param.startswith("token") else "trust"
    auth = {"mode": "token", "token_secret": SECRET} if mode == "token" else {"mode": "trust"}
    storage: dict[str, Any] = {}
    if request.param.endswith("postgres"):
        pytest.importorskip("psycopg")
        from tests.postgres_server import shared

        storage = {"storage": {"backend": "postgres", "url": shared().fresh_database()}}
    config = make_config(
        short_tmp,
        **storage,
        auth=auth,
        llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0, "timeout": 5.0},
        # The background worker never runs here: every LLM reply goes to the call that asks.
        extraction={"debounce_seconds": 3600},
        supersession={"decider": "rules"},
    )
    daemon = Daemon(config)
    await nursery.start(daemon.run)
    yield World(mode, await NdjsonPeer.connect(config.socket_path), fake)
    daemon.request_stop()


def facts(*contents: str, **fields: Any) -> Answer:
    return Answer(
        {"facts": [{"content": c, "memory_type": "identity", "confidence": 0.95, **fields} for c in contents]}
    )


def said(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}, {"role": "assistant", "content": "Noted."}]


async def test_supersession_metadata_never_names_a_hidden_memory(world: World) -> None:
    g1, p1, g2 = (
        world.who("alice", "g1", "group"),
        world.who("alice", "p1", "private"),
        world.who("alice", "g2", "group"),
    )
    berlin = (await world.ok("memory.add", g1, content="I live in Berlin"))["id"]
    zurich = await world.ok("memory.add", p1, content="I live in Zurich near the clinic", sensitivity="sensitive")
    assert zurich["superseded"] == [berlin]  # the attack needs the supersession to have happened
    # Where the new memory is visible, the metadata says what replaced the old one.
    seen = await world.ok("memory.get", p1, memory_id=berlin)
    assert seen["superseded_by"] == zurich["id"] and "zurich" in seen["supersede_reason"]
    # From another group chat: the old memory, never its successor's id or words.
    old = await world.ok("memory.get", g2, memory_id=berlin)
    assert old["superseded_by"] is None and old["supersede_reason"] is None and old["superseded_at"] is not None
    (listed,) = [r for r in await world.ok("memory.list", g2, include_superseded=True) if r["id"] == berlin]
    assert listed["superseded_by"] is None and listed["supersede_reason"] is None
    assert [r["id"] for r in await world.ok("memory.history", g2, memory_id=berlin)] == [berlin]
    text = await world.everything(g2, ids=[zurich["id"]], names=[], query="where do I live Berlin Zurich")
    assert zurich["id"].casefold() not in text and "zurich" not in text and "clinic" not in text


async def test_people_known_only_from_hidden_memories_do_not_exist_for_a_group(world: World) -> None:
    p1, g2 = world.who("alice", "p1", "private"), world.who("alice", "g2", "group")
    await world.ok(
        "memory.add", p1, content="My wife's name is Sarah Klein and she is pregnant", sensitivity="sensitive"
    )
    await world.ok("memory.add", p1, content="My therapist Anna Kovacs says I should rest", conversation_private=True)
    # The private chat knows both people (the attack is about something that exists).
    assert {p["name"] for p in await world.ok("person.list", p1)} >= {"Sarah Klein", "Anna Kovacs"}
    context = await world.ok("memory.context", p1, message="gift for my wife?")
    assert [p["name"] for p in context["people"]] == ["Sarah Klein"]
    # The group: nobody, by any name, through any method.
    context = await world.ok("memory.context", g2, message="gift for my wife? ask Anna Kovacs or Sarah Klein")
    assert context["people"] == [] and "sarah" not in context["text"].casefold()
    names = ["my wife", "Sarah Klein", "Sarah", "my therapist", "Kovacs", "Anna Kovacs"]
    text = await world.everything(g2, ids=[], names=names, query="gift for my wife? Sarah Klein Kovacs")
    assert "sarah" not in text and "kovacs" not in text and "pregnant" not in text
    for name in names:
        assert await world.code("person.get", g2, name=name) == -32001
        assert await world.code("person.alias", g2, name=name, alias="Sunny") == -32001
        assert await world.code("memory.forget_person", g2, person=name) == -32001
        assert await world.code("person.merge", g2, **{"from": name, "into": "my wife"}) == -32001
    # Saying "my wife" in the group makes a person of the group's own, never the private one.
    await world.ok("memory.add", g2, content="My wife loves roses", subjects=["my wife"])
    await world.ok("memory.add", g2, content="Sarah Klein brings the cake", subjects=["Sarah Klein"])
    group_people = await world.ok("person.list", g2)
    assert all(p["relationship"] != "wife" or "Sarah" not in p["name"] for p in group_people), group_people
    assert "pregnant" not in json.dumps(await world.ok("person.get", g2, name="Sarah Klein"))
    # The private chat still sees its Sarah with her memories.
    wife = await world.ok("person.get", p1, name="my wife")
    assert wife["name"] == "Sarah Klein" and any("pregnant" in m["content"] for m in wife["memories"])


async def test_extraction_never_refreshes_or_supersedes_what_the_chat_cannot_see(world: World) -> None:
    alice_g, bob_g = world.who("alice", "g", "group"), world.who("bob", "g", "group")
    p1, g2 = world.who("alice", "p1", "private"), world.who("alice", "g2", "group")
    sensitive = await world.ok(
        "memory.add", alice_g, content="The launch code is in the blue folder", shared=True, sensitivity="sensitive"
    )
    allergy = await world.ok("memory.add", p1, content="I am allergic to peanuts")
    red = await world.ok("memory.add", p1, content="My favorite color is red")
    # Bob, in the same group, says the same thing as Alice's hidden group memory.
    world.fake.script.append(facts("The launch code is in the blue folder", shared=True, sensitivity="sensitive"))
    bob = await world.ok("memory.extract_from_messages", bob_g, messages=said("the launch code is in the blue folder"))
    assert sensitive["id"] not in bob["ids"] + bob["refreshed"] and bob["stored"] == 1
    # Alice, from another group, restates private-chat facts.
    world.fake.script.append(facts("I am allergic to peanuts"))
    again = await world.ok("memory.extract_from_messages", g2, messages=said("I am allergic to peanuts"))
    assert allergy["id"] not in again["ids"] + again["refreshed"]
    # memory.extract (by message id, from observed messages) and memory.delete from there too.
    await world.ok(
        "memory.observe", g2, messages=[{"role": "user", "content": "peanuts!", "id": "m7"}], session_key="s-g2"
    )
    world.fake.script.append(facts("I am allergic to peanuts"))
    extracted = await world.ok("memory.extract", g2, message_id="m7", session_key="s-g2")
    assert allergy["id"] not in extracted["ids"] + extracted["refreshed"]
    for hidden in (allergy["id"], allergy["id"][:8], sensitive["id"][:10]):
        assert await world.ok("memory.delete", g2, memory_id=hidden) == {"deleted": False, "id": None}
        assert await world.ok("memory.delete", bob_g, memory_id=hidden) == {"deleted": False, "id": None}
    world.fake.script.append(facts("My favorite color is blue"))
    blue = await world.ok("memory.extract_from_messages", g2, messages=said("my favorite color is blue"))
    assert blue["stored"] == 1
    kept = await world.ok("memory.get", p1, memory_id=red["id"])
    assert kept["superseded_by"] is None and kept["superseded_at"] is None
    # The same restatement where the old memory is visible does replace it (the rule works).
    world.fake.script.append(facts("My favorite color is green"))
    green = await world.ok("memory.extract_from_messages", p1, messages=said("my favorite color is green"))
    assert (await world.ok("memory.get", p1, memory_id=red["id"]))["superseded_by"] == green["ids"][0]
    # And memory.add's own duplicate check: Bob's add is not answered with Alice's hidden memory.
    added = await world.ok(
        "memory.add", bob_g, content="The launch code is in the blue folder", shared=True, sensitivity="sensitive"
    )
    assert added["id"] != sensitive["id"]


async def test_group_members_statements_about_themselves_do_not_replace_each_other(world: World) -> None:
    alice, bob = world.who("alice", "g", "group"), world.who("bob", "g", "group")
    berlin = await world.ok("memory.add", alice, content="I live in Berlin", shared=True)
    paris = await world.ok("memory.add", bob, content="I live in Paris", shared=True)
    assert paris["superseded"] == []
    assert berlin["id"] in {r["id"] for r in await world.ok("memory.list", alice)}
    world.fake.script.append(facts("I live in Rome", shared=True))
    rome = await world.ok("memory.extract_from_messages", bob, messages=said("I live in Rome"))
    live = {r["id"] for r in await world.ok("memory.list", alice)}
    assert berlin["id"] in live and rome["stored"] == 1
    # The owner's own newer statement still replaces the older one.
    moved = await world.ok("memory.add", alice, content="I live in Hamburg", shared=True)
    assert moved["superseded"] == [berlin["id"]]


async def test_a_conversation_private_memory_needs_a_chat(world: World) -> None:
    nowhere = world.who("alice", None, None)
    error = await call_error(world.peer, "memory.add", {**nowhere, "content": "x", "conversation_private": True})
    assert error["code"] == -32602 and error["data"]["field"] == "conversation_private"
    assert await world.ok("memory.list", nowhere) == []


async def test_claimless_tokens_record_the_same_provenance_on_every_write_path(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    """A token without a chat_type claim: every write path records null, whatever the params
    say (memory.add always did; observe and the extract methods took the param)."""
    config = make_config(
        short_tmp,
        auth={"mode": "token", "token_secret": SECRET},
        llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0, "timeout": 5.0},
        extraction={"debounce_seconds": 0.1},
    )
    daemon = Daemon(config)
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    token = {"context_token": mint_token(SECRET, "alice", "g")}
    claims = {"chat_type": "private", "source_username": "mallory", "username": "mallory"}
    added = await call_ok(peer, "memory.add", {**token, **claims, "content": "I drink tea"})
    fake.script.append(facts("I drink coffee"))
    extracted = await call_ok(peer, "memory.extract_from_messages", {**token, **claims, "messages": said("coffee")})
    fake.default = facts("I drink water")
    await call_ok(peer, "memory.observe", {**token, **claims, "messages": said("water"), "session_key": "s"})
    with trio.fail_after(20):
        while len(await call_ok(peer, "memory.list", token)) < 3:
            await trio.sleep(0.05)
    records = {r["content"]: r for r in await call_ok(peer, "memory.list", token)}
    assert set(records) == {"I drink tea", "I drink coffee", "I drink water"}, records
    for record in records.values():
        assert record["chat_type"] is None and record["source_username"] is None, record
    assert added["id"] in {r["id"] for r in records.values()} and extracted["stored"] == 1
    # Nor do unclaimed params decide who the owner is for people learning: "Sarah" stays a person.
    await call_ok(
        peer,
        "memory.add",
        {**token, "username": "Sarah", "source_username": "Sarah", "content": "Sarah likes tea", "subjects": ["Sarah"]},
    )
    assert "Sarah" in {p["name"] for p in await call_ok(peer, "person.list", token)}
    daemon.request_stop()


async def test_a_refused_supersedes_never_names_a_hidden_successor(world: World) -> None:
    g1, p1 = world.who("alice", "g1", "group"), world.who("alice", "p1", "private")
    berlin = (await world.ok("memory.add", g1, content="I live in Berlin"))["id"]
    zurich = (await world.ok("memory.add", p1, content="I live in Zurich", sensitivity="sensitive"))["id"]
    error = await call_error(world.peer, "memory.add", {**g1, "content": "I live in Rome", "supersedes": berlin})
    assert error["code"] == -32602 and "already superseded" in error["data"]["reason"]
    assert zurich not in json.dumps(error)
    error = await call_error(world.peer, "memory.add", {**p1, "content": "I live in Rome", "supersedes": berlin})
    assert zurich in error["data"]["reason"]  # where it may be seen, it is named


async def test_a_private_chat_never_adds_a_relationship_a_group_would_see(world: World) -> None:
    """The group knows Sarah Klein from its own memory; the private chat says she is the wife.
    The group must not learn "wife" from the person record they share."""
    g1, p1, g2 = (
        world.who("alice", "g1", "group"),
        world.who("alice", "p1", "private"),
        world.who("alice", "g2", "group"),
    )
    await world.ok("memory.add", g1, content="Sarah Klein brings the cake on Friday", subjects=["Sarah Klein"])
    await world.ok(
        "memory.add", p1, content="My wife's name is Sarah Klein and she is pregnant", sensitivity="sensitive"
    )
    for group in (g1, g2):
        people = await world.ok("person.list", group)
        assert [(p["name"], p["relationship"]) for p in people] == [("Sarah Klein", None)], people
        assert "wife" not in json.dumps(people)
        context = await world.ok("memory.context", group, message="what should I get my wife?")
        assert context["people"] == [] and "wife" not in context["text"] and "pregnant" not in json.dumps(context)
        assert await world.code("person.get", group, name="my wife") == -32001
    wife = await world.ok("person.get", p1, name="my wife")
    assert wife["name"] == "Sarah Klein" and wife["relationship"] == "wife"
    # A private restatement of what the group already knows changes nothing there.
    await world.ok("memory.add", p1, content="Sarah Klein brings the cake on Friday", subjects=["Sarah Klein"])
    assert [p["relationship"] for p in await world.ok("person.list", g2)] == [None]


async def test_a_groups_own_person_is_found_where_a_hidden_one_shares_the_phrase(world: World) -> None:
    p1, g2 = world.who("alice", "p1", "private"), world.who("alice", "g2", "group")
    await world.ok(
        "memory.add", p1, content="My wife's name is Sarah Klein and she is pregnant", sensitivity="sensitive"
    )
    await world.ok("memory.add", g2, content="Sarah brings the cake", subjects=["Sarah"])
    # "Sarah Klein" is the hidden person's whole name; the group knows a Sarah.
    context = await world.ok("memory.context", g2, message="is Sarah Klein coming?")
    assert [p["name"] for p in context["people"]] == ["Sarah"]
    assert "klein" not in json.dumps(context["people"]).casefold() and "pregnant" not in json.dumps(context)


async def test_a_hidden_person_never_joins_two_subjects_for_supersession(world: World) -> None:
    """Only a private chat knows that the wife is Sarah; in a group, "my wife" and "Sarah" are
    two subjects, so one statement does not replace the other (which would tell the group)."""
    p1, g2 = world.who("alice", "p1", "private"), world.who("alice", "g2", "group")
    await world.ok("memory.add", p1, content="My wife's name is Sarah and she is pregnant", sensitivity="sensitive")
    red = await world.ok("memory.add", g2, content="My wife's favorite color is red")
    blue = await world.ok("memory.add", g2, content="Sarah's favorite color is blue")
    assert blue["superseded"] == []
    assert red["id"] in {r["id"] for r in await world.ok("memory.list", g2)}
    # In the private chat, where she is known, the same pair is one subject.
    green = await world.ok("memory.add", p1, content="Sarah's favorite color is green")
    assert set(green["superseded"]) == {red["id"], blue["id"]}


async def test_a_hidden_id_or_person_is_refused_as_one_that_never_existed(world: World) -> None:
    """No error tells a memory or person the caller may not see from one that never existed:
    the same reply, word for word, by full id and by prefix, from another chat and another user."""
    p1, g2, bob = (
        world.who("alice", "p1", "private"),
        world.who("alice", "g2", "group"),
        world.who("bob", "g2", "group"),
    )
    hidden = (
        await world.ok(
            "memory.add", p1, content="My diagnosis is lupus", sensitivity="sensitive", subjects=["Dr Kovacs"]
        )
    )["id"]
    await world.ok("memory.add", g2, content="The group likes pizza")
    await world.ok("memory.add", bob, content="Bob likes tea")
    never = "Z" * 26

    async def reply(method: str, who: dict[str, Any], params: dict[str, Any]) -> str:
        answer = await world.peer.call(method, {**who, **params})
        answer.pop("id", None)
        return json.dumps(answer)

    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("memory.get", "memory_id", {}),
        ("memory.history", "memory_id", {}),
        ("memory.pin", "memory_id", {}),
        ("memory.unpin", "memory_id", {}),
        ("memory.delete", "memory_id", {}),
        ("memory.list", "before_id", {}),
        ("memory.add", "supersedes", {"content": "I eat fish on Fridays"}),
    ]
    for who in (g2, bob):
        for cut in (26, 12, 8):
            for method, field, params in calls:
                theirs = await reply(method, who, {**params, field: hidden[:cut]})
                nobodys = await reply(method, who, {**params, field: never[:cut]})
                assert theirs.replace(hidden[:cut], "<id>") == nobodys.replace(never[:cut], "<id>"), (method, cut)
    (kovacs,) = await world.ok("person.list", p1)
    for who in (g2, bob):
        for method, params in [
            ("person.get", {"name": "{}"}),
            ("person.alias", {"name": "{}", "alias": "Doc"}),
            ("memory.forget_person", {"person": "{}"}),
            ("person.merge", {"from": "{}", "into": "{}"}),
        ]:
            theirs = await reply(method, who, {k: v.format(kovacs["id"]) for k, v in params.items()})
            nobodys = await reply(method, who, {k: v.format(never) for k, v in params.items()})
            assert theirs.replace(kovacs["id"], "<id>") == nobodys.replace(never, "<id>"), method
    # And none of those calls changed anything where the memory is visible.
    kept = await world.ok("memory.get", p1, memory_id=hidden)
    assert kept["pinned"] is False and kept["superseded_by"] is None
    assert [p["aliases"] for p in await world.ok("person.list", p1)] == [[]]
