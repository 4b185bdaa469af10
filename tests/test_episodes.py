"""Episodes through the socket: observed messages become searchable memories of type
``episode`` under the disclosure rules, a ``types`` filter selects, memory.context prefers
facts, episodes have their own retention and do not count towards max_entries, and messages
observed while extraction was off are extracted once it is on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from memoryd.server.daemon import Daemon
from memoryd_client import mint_token
from tests.conftest import make_config
from tests.fake_llm import Answer, FakeLlm
from tests.test_extraction_daemon import llm_config
from tests.wire import NdjsonPeer, call_ok

DM = {"user_id": "alice", "chat_id": "dm-alice", "chat_type": "private"}
TEAM = {"user_id": "alice", "chat_id": "team", "chat_type": "group"}
MESSAGES = [
    {"role": "user", "content": "We adopted a greyhound called Biscuit last weekend", "id": "m1",
     "username": "alice", "display_name": "Alice", "timestamp": "2026-03-01T10:00:00Z"},
    {"role": "assistant", "content": "Congratulations on adopting Biscuit!", "id": "m2"},
]  # fmt: skip


async def start(nursery: trio.Nursery, base: Path, **sections: Any) -> tuple[Daemon, NdjsonPeer]:
    daemon = Daemon(make_config(base, **sections))
    await nursery.start(daemon.run)
    return daemon, await NdjsonPeer.connect(daemon.config.socket_path)


async def test_an_observed_message_is_found_as_an_episode_with_its_provenance(peer: NdjsonPeer) -> None:
    assert (await call_ok(peer, "memory.observe", {**DM, "messages": MESSAGES, "session_key": "s1"}))["accepted"] == 2
    hits = await call_ok(peer, "memory.search", {**DM, "query": "greyhound Biscuit"})
    said = next(hit for hit in hits if hit["source_message_id"] == "m1")
    assert said["memory_type"] == "episode"
    assert said["content"] == "[1 March 2026, 10:00 am] Alice: We adopted a greyhound called Biscuit last weekend"
    assert said["source_username"] == "alice" and said["source_session"] == "s1" and said["chat_type"] == "private"
    assert said["metadata"] == {"role": "user", "sent_at": "2026-03-01T10:00:00+00:00"}
    assert said["chat_id"] == "dm-alice" and said["scope"] == "personal"
    reply = next(hit for hit in hits if hit["source_message_id"] == "m2")
    assert reply["metadata"]["role"] == "assistant" and reply["content"].startswith("assistant: ")


async def test_an_episode_records_the_speaker_its_text_names(short_tmp: Path, nursery: trio.Nursery) -> None:
    # ash's sandbox: the speaker is in the token's claims, the message itself names nobody.
    secret = "4b" * 32
    _, peer = await start(nursery, short_tmp, auth={"mode": "token", "token_secret": secret})
    token = mint_token(secret, "yan", "g9", chat_type="group", source_username="yan", source_display_name="Yan")
    message = {"role": "user", "content": "I booked the pottery class for Thursday", "id": "m7"}
    await call_ok(peer, "memory.observe", {"context_token": token, "messages": [message]})
    [said] = await call_ok(peer, "memory.search", {"context_token": token, "query": "pottery class"})
    assert said["content"] == "Yan: I booked the pottery class for Thursday"
    assert (said["source_username"], said["source_display_name"], said["chat_type"]) == ("yan", "Yan", "group")
    # ash shows the speaker's name as the source, and what they say of themselves as fact.
    assert (said["source"], said["source_label"], said["trust"]) == ("Yan", "conversation", "fact")


async def test_search_finds_facts_and_episodes_and_types_selects(peer: NdjsonPeer) -> None:
    await call_ok(peer, "memory.observe", {**DM, "messages": MESSAGES})
    await call_ok(peer, "memory.add", {**DM, "content": "Alice has a greyhound named Biscuit"})
    both = await call_ok(peer, "memory.search", {**DM, "query": "greyhound Biscuit"})
    assert {hit["memory_type"] for hit in both} == {"episode", "knowledge"}
    facts = await call_ok(peer, "memory.search", {**DM, "query": "greyhound Biscuit", "types": ["knowledge"]})
    assert [hit["content"] for hit in facts] == ["Alice has a greyhound named Biscuit"]
    episodes = await call_ok(peer, "memory.search", {**DM, "query": "greyhound Biscuit", "types": ["episode"]})
    assert episodes and all(hit["memory_type"] == "episode" for hit in episodes)
    # memory.list shows the memories a user manages; episodes on request.
    assert [m["memory_type"] for m in await call_ok(peer, "memory.list", {**DM})] == ["knowledge"]
    listed = await call_ok(peer, "memory.list", {**DM, "types": ["episode"]})
    assert len(listed) == 2 and {m["memory_type"] for m in listed} == {"episode"}
    bad = await peer.call("memory.search", {**DM, "query": "x", "types": []})
    assert bad["error"]["code"] == -32602 and "types" in bad["error"]["message"]


async def test_a_private_chats_episodes_never_reach_a_group_chat(peer: NdjsonPeer) -> None:
    await call_ok(peer, "memory.observe", {**DM, "messages": MESSAGES})
    assert await call_ok(peer, "memory.search", {**DM, "query": "greyhound"})
    assert await call_ok(peer, "memory.search", {**TEAM, "query": "greyhound"}) == []
    other = await call_ok(peer, "memory.search", {"user_id": "bob", "chat_id": "dm-alice", "query": "greyhound"})
    assert other == []


async def test_context_prefers_facts_and_labels_relevant_episodes(peer: NdjsonPeer) -> None:
    await call_ok(peer, "memory.observe", {**DM, "messages": MESSAGES})
    await call_ok(
        peer, "memory.observe", {**DM, "messages": [{"role": "user", "content": "The weather is grey today"}]}
    )
    await call_ok(peer, "memory.add", {**DM, "content": "Alice's greyhound Biscuit eats salmon kibble"})
    message = "what does the greyhound Biscuit eat?"
    # The episodes' relevance to the message, as a search reports it.
    found = await call_ok(peer, "memory.search", {**DM, "query": message, "types": ["episode"], "min_relevance": 0})
    adopted = next(hit["relevance"] for hit in found if "adopted" in hit["content"])
    weather = [hit["relevance"] for hit in found if "weather" in hit["content"]]
    assert not weather or max(weather) < adopted
    # types composes with min_relevance: every hit kept clears it.
    above = await call_ok(
        peer, "memory.search", {**DM, "query": message, "types": ["episode"], "min_relevance": adopted}
    )
    assert any("adopted" in hit["content"] for hit in above) and all(hit["relevance"] >= adopted for hit in above)
    if adopted < 1:
        beyond = {**DM, "query": message, "types": ["episode"], "min_relevance": min(1.0, adopted + 1e-6)}
        assert all("adopted" not in hit["content"] for hit in await call_ok(peer, "memory.search", beyond))
    asked = {**DM, "message": message, "limit": 3}
    context = await call_ok(peer, "memory.context", {**asked, "min_relevance": adopted})
    types = [memory["memory_type"] for memory in context["memories"]]
    assert types.count("knowledge") <= 1 and all(m["relevance"] >= adopted for m in context["memories"])
    if types.count("knowledge"):  # facts come first
        assert types[0] == "knowledge"
        assert "Relevant memories:\n- Alice's greyhound Biscuit eats salmon kibble" in context["text"]
    assert "From past conversations:\n- [1 March 2026, 10:00 am] Alice: We adopted a greyhound" in context["text"]
    assert "weather" not in context["text"]  # an episode that does not clear the threshold stays out
    # Above the episode's relevance it stays out of the context, as a fact would.
    if adopted < 1:
        stricter = await call_ok(peer, "memory.context", {**asked, "min_relevance": min(1.0, adopted + 1e-6)})
        assert "From past conversations:" not in stricter["text"]
        assert all(m["memory_type"] != "episode" for m in stricter["memories"])


async def test_episodes_do_not_count_towards_max_entries(short_tmp: Path, nursery: trio.Nursery) -> None:
    _, peer = await start(nursery, short_tmp, lifecycle={"max_entries_per_user": 2})
    await call_ok(peer, "memory.observe", {**DM, "messages": MESSAGES * 3})
    await call_ok(peer, "memory.add", {**DM, "content": "Alice likes tea"})
    await call_ok(peer, "memory.add", {**DM, "content": "Alice likes jazz"})
    assert len(await call_ok(peer, "memory.list", {**DM})) == 2
    assert len(await call_ok(peer, "memory.list", {**DM, "types": ["episode"]})) == 6


async def test_episodes_expire_after_their_retention(short_tmp: Path, nursery: trio.Nursery) -> None:
    config = make_config(short_tmp)
    config = type(config)(**{**{f: getattr(config, f) for f in config.__struct_fields__},
                             "episodes": type(config.episodes)(retention_days=0.00001)})  # fmt: skip
    daemon = Daemon(config)
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    await call_ok(peer, "memory.observe", {**DM, "messages": MESSAGES})
    await call_ok(peer, "memory.add", {**DM, "content": "Alice likes tea"})
    await trio.sleep(1.5)
    assert daemon.maintenance is not None
    runs = daemon.maintenance.runs
    daemon.maintenance.run_now()
    summary = await daemon.maintenance.wait_for_runs(runs + 1)
    assert summary is not None and summary["episodes_pruned"] == 2
    assert await call_ok(peer, "memory.list", {**DM, "types": ["episode"]}) == []
    assert [m["content"] for m in await call_ok(peer, "memory.list", {**DM})] == ["Alice likes tea"]


async def test_episodes_can_be_turned_off(short_tmp: Path, nursery: trio.Nursery) -> None:
    config = make_config(short_tmp)
    config = type(config)(**{**{f: getattr(config, f) for f in config.__struct_fields__},
                             "episodes": type(config.episodes)(enabled=False)})  # fmt: skip
    daemon = Daemon(config)
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    assert (await call_ok(peer, "memory.observe", {**DM, "messages": MESSAGES}))["accepted"] == 2
    assert await call_ok(peer, "memory.search", {**DM, "query": "greyhound"}) == []


async def test_messages_observed_while_extraction_was_off_are_extracted_once_it_is_on(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    offline = Daemon(make_config(short_tmp))
    await nursery.start(offline.run)
    peer = await NdjsonPeer.connect(offline.config.socket_path)
    await call_ok(peer, "memory.observe", {**DM, "messages": MESSAGES, "session_key": "old"})
    await trio.sleep(0.05)  # a later arrival
    await call_ok(
        peer,
        "memory.observe",
        {**DM, "messages": [{"role": "user", "content": "I play the cello"}], "session_key": "new"},
    )
    offline.request_stop()
    await trio.sleep(0.5)

    fake.default = Answer(
        {
            "facts": [
                {"content": "Alice has a greyhound named Biscuit.", "memory_type": "relationship", "confidence": 0.9}
            ]
        }
    )
    config = llm_config(short_tmp, fake)
    # One extraction at a time, so the order the model sees them in is the order they were due.
    config = type(config)(**{**{f: getattr(config, f) for f in config.__struct_fields__},
                             "llm": type(config.llm)(**{**{f: getattr(config.llm, f) for f in config.llm.__struct_fields__},
                                                       "concurrency": 1})})  # fmt: skip
    online = Daemon(config)
    await nursery.start(online.run)
    peer = await NdjsonPeer.connect(online.config.socket_path)
    with trio.fail_after(20):
        while len(fake.seen) < 2:
            await trio.sleep(0.05)
    assert "greyhound called Biscuit" in fake.seen[0].prompt  # the oldest session first
    assert "cello" in fake.seen[1].prompt
    hits = await call_ok(peer, "memory.search", {**DM, "query": "greyhound", "types": ["relationship"]})
    assert [hit["content"] for hit in hits] == ["Alice has a greyhound named Biscuit."]
    fake.stopping.set()
