"""Conversation intake and extraction through the socket of an in-process daemon, against a
real loopback fake LLM: the prompt, what is stored (types, subjects, provenance, scope),
what is kept out, the debounce, an LLM that is down then back, parking and `jobs retry`."""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
import pytest
import trio

from memoryd.admin import jobs as jobs_command
from memoryd.server.daemon import Daemon
from memoryd_client import AsyncMemoryClient, MemoryClient, RequestTimeout
from tests.conftest import make_config
from tests.fake_llm import Answer, FakeLlm, Raw, Seen
from tests.wire import NdjsonPeer, call_ok, drained

ALICE = {"user_id": "alice", "chat_id": "chat-1"}
BOB = {"user_id": "bob", "chat_id": "chat-1"}
EXCHANGES = [
    [
        {"role": "user", "content": "My wife Sarah loves Italian food.", "id": "m1"},
        {"role": "assistant", "content": "Noted!", "id": "m2"},
    ],
    [
        {"role": "user", "content": "We are flying to Rome on Friday.", "id": "m3"},
        {"role": "assistant", "content": "Have a good trip.", "id": "m4"},
    ],
    [
        {"role": "user", "content": "I am allergic to peanuts.", "id": "m5"},
        {"role": "assistant", "content": "I will remember.", "id": "m6"},
    ],
]
FACTS = {
    "facts": [
        {
            "content": "Alice's wife Sarah loves Italian food.",
            "memory_type": "relationship",
            "confidence": 0.95,
            "subjects": ["Sarah"],
            "sensitivity": "personal",
            "speaker": "alice",
        },
        {
            "content": "Alice and Sarah fly to Rome on 27 November 2026.",
            "memory_type": "event",
            "confidence": 0.9,
            "subjects": ["Sarah"],
            "sensitivity": "personal",
        },
        {"content": "Alice is allergic to peanuts.", "memory_type": "identity", "confidence": 0.99},
        {"content": "Alice might like jazz.", "memory_type": "preference", "confidence": 0.3},
        {"content": "The assistant will remember allergies.", "memory_type": "knowledge", "confidence": 0.9},
        {
            "content": "Alice's API key is sk-abcdefghijklmnopqrstuvwxyz123456",
            "memory_type": "knowledge",
            "confidence": 0.9,
        },
    ]
}


def llm_config(base: Path, fake: FakeLlm, **extraction: Any) -> Any:
    return make_config(
        base,
        llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0, "timeout": 5.0},
        extraction={"debounce_seconds": 0.2, **extraction},
    )


async def start(nursery: trio.Nursery, config: Any) -> tuple[Daemon, NdjsonPeer]:
    daemon = Daemon(config)
    await nursery.start(daemon.run)
    return daemon, await NdjsonPeer.connect(config.socket_path)


async def extraction_state(peer: NdjsonPeer) -> dict[str, Any]:
    health: dict[str, Any] = await call_ok(peer, "system.health", {})
    return dict(health["extraction"])


async def wait_extraction(peer: NdjsonPeer, predicate: Any, timeout: float = 20) -> dict[str, Any]:
    with trio.fail_after(timeout):
        while True:
            state = await extraction_state(peer)
            if predicate(state):
                return state
            await trio.sleep(0.05)


def idle_after(count: int) -> Any:
    return lambda s: s["sessions_extracted_since_start"] >= count and s["pending_sessions"] == 0


async def observe_all(peer: NdjsonPeer, identity: dict[str, Any], **extra: Any) -> None:
    for exchange in EXCHANGES:
        reply = await call_ok(peer, "memory.observe", {**identity, "messages": exchange, **extra})
        assert reply == {"accepted": 2}


async def test_observe_stores_without_an_llm_and_the_extract_methods_say_how_to_turn_it_on(
    short_tmp: Path, nursery: trio.Nursery
) -> None:
    _, peer = await start(nursery, make_config(short_tmp))
    await observe_all(peer, ALICE, session_key="s1")
    state = await extraction_state(peer)
    assert state["provider"] == "none" and state["messages_held"] == 6 and state["pending_sessions"] == 0
    for method, params in [
        ("memory.extract", {"message_id": "m1"}),
        ("memory.extract_from_messages", {"messages": EXCHANGES[0]}),
    ]:
        reply = await peer.call(method, {**ALICE, **params})
        assert reply["error"]["code"] == -32008
        assert "[llm]" in reply["error"]["message"]


async def test_three_exchanges_are_extracted_once_after_the_debounce_and_found_by_search(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Answer(FACTS)
    _, peer = await start(nursery, llm_config(short_tmp, fake))
    await observe_all(
        peer,
        ALICE,
        session_key="s1",
        chat_type="private",
        source_username="alice",
        source_display_name="Alice Liddell",
        timezone="Europe/Paris",
    )
    state = await wait_extraction(peer, idle_after(1))
    assert len(fake.seen) == 1, "the debounce must batch the three exchanges into one call"
    prompt = fake.seen[0].system + fake.seen[0].prompt
    for exchange in EXCHANGES:
        assert exchange[0]["content"] in prompt
    assert "@alice (Alice Liddell)" in prompt
    paris_now = datetime.now(ZoneInfo("Europe/Paris"))
    assert f"Current date and time: {paris_now:%A} {paris_now.day} {paris_now:%B %Y}" in prompt
    assert "(UTC+01:00)" in prompt or "(UTC+02:00)" in prompt
    assert state["memories_stored_since_start"] == 3
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "peanuts", "types": ["identity"]})
    assert [hit["content"] for hit in hits] == ["Alice is allergic to peanuts."]
    # Unfiltered, the observed message is found too, as an episode.
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "peanuts"})
    assert {(hit["memory_type"], hit["content"]) for hit in hits} == {
        ("identity", "Alice is allergic to peanuts."),
        ("episode", "Alice Liddell: I am allergic to peanuts."),
    }
    listed = {m["content"]: m for m in await call_ok(peer, "memory.list", {**ALICE, "limit": 50})}
    assert set(listed) == {
        "Alice's wife Sarah loves Italian food.",
        "Alice and Sarah fly to Rome on 27 November 2026.",
        "Alice is allergic to peanuts.",
    }
    wife = listed["Alice's wife Sarah loves Italian food."]
    assert wife["memory_type"] == "relationship" and wife["subjects"] == ["Sarah"]
    assert (
        wife["source_label"] == "extraction"
        and wife["source"] == "Alice Liddell"
        and wife["scope"] == "personal"
        and wife["chat_id"] == "chat-1"
    )
    assert wife["chat_type"] == "private" and wife["source_session"] == "s1"
    assert wife["source_username"] == "alice" and wife["source_display_name"] == "Alice Liddell"
    assert wife["source_message_id"] == "m6" and wife["sensitivity"] == "personal"
    assert wife["expires_at"] is None
    trip = listed["Alice and Sarah fly to Rome on 27 November 2026."]
    assert trip["memory_type"] == "event" and trip["expires_at"] is not None
    health = await call_ok(peer, "system.health", {})
    assert health["secrets"]["refused"] == 1 and health["secrets"]["by_kind"] == {"api_key": 1}
    # People learn from extracted memories as from memory.add.
    people = await call_ok(peer, "person.list", ALICE)
    assert "Sarah" in [person["name"] for person in people]
    # Quiet again: nothing more is asked.
    await trio.sleep(0.5)
    assert len(fake.seen) == 1


async def test_a_message_posted_with_the_owners_user_id_names_the_owner(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    # The call names no speaker; the message says who wrote it, with the caller's user_id.
    fact = {"content": "Alice L is allergic to peanuts.", "memory_type": "identity", "confidence": 0.99}
    fake.default = Answer({"facts": [{**fact, "subjects": ["Alice L"]}]})
    _, peer = await start(nursery, llm_config(short_tmp, fake))
    message = {
        "role": "user",
        "content": "I am allergic to peanuts",
        "id": "m1",
        "user_id": "alice",
        "username": "al",
        "display_name": "Alice L",
        "timestamp": "2026-11-20T10:00:00Z",
    }
    await call_ok(peer, "memory.observe", {**ALICE, "messages": [message]})
    await wait_extraction(peer, idle_after(1))
    asked = fake.seen[0].prompt
    assert "Owner of this memory: @al (Alice L)" in asked and '"Alice L"' in asked and '"alice"' in asked
    assert '<message role="user" from="@al (Alice L)" at="2026-11-20 10:00">' in asked
    (memory,) = await call_ok(peer, "memory.list", ALICE)
    # The owner is not a subject of their own fact, and is the one who stated it.
    assert memory["subjects"] == [] and memory["trust"] == "fact"
    assert memory["source_username"] == "al" and memory["source_display_name"] == "Alice L"
    assert memory["source_message_id"] == "m1"
    assert await call_ok(peer, "person.list", ALICE) == []


async def test_a_fact_about_the_group_becomes_a_group_memory_in_a_group_chat(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Answer(
        {
            "facts": [
                {"content": "The team ships on Fridays.", "memory_type": "knowledge", "confidence": 0.9, "shared": True}
            ]
        }
    )
    _, peer = await start(nursery, llm_config(short_tmp, fake))
    message = {"role": "user", "content": "We ship on Fridays.", "id": "g1", "username": "alice"}
    await call_ok(peer, "memory.observe", {**ALICE, "messages": [message], "chat_type": "group"})
    await wait_extraction(peer, idle_after(1))
    (hit,) = await call_ok(peer, "memory.search", {**BOB, "query": "ship Fridays"})
    assert hit["scope"] == "group" and hit["chat_type"] == "group"


async def test_an_llm_that_is_down_loses_nothing_and_doubles_nothing_once_it_is_back(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.script.append(Raw(503, b'{"error": "overloaded"}', {"Retry-After": "1"}))
    fake.default = Answer({"facts": [FACTS["facts"][2]]})
    _, peer = await start(nursery, llm_config(short_tmp, fake, max_attempts=5))
    await observe_all(peer, ALICE)
    failing = await wait_extraction(peer, lambda s: s["failing_sessions"] >= 1)
    assert "503" in failing["last_error"] and failing["pending_sessions"] == 1
    await wait_extraction(peer, idle_after(1))
    assert len(fake.seen) == 2 and fake.seen[0].prompt_without_clock == fake.seen[1].prompt_without_clock
    # A new exchange: only the new messages are read, and the fact already stored is refreshed.
    await call_ok(peer, "memory.observe", {**ALICE, "messages": [{"role": "user", "content": "Peanuts, remember."}]})
    state = await wait_extraction(peer, idle_after(2))
    assert "allergic to peanuts" not in fake.seen[2].prompt and "Peanuts, remember." in fake.seen[2].prompt
    assert state["memories_refreshed_since_start"] == 1
    listed = await call_ok(peer, "memory.list", {**ALICE})
    assert [m["content"] for m in listed] == ["Alice is allergic to peanuts."]


async def test_a_refusing_llm_parks_the_job_until_jobs_retry(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.script.append(Raw(401, b'{"error": {"message": "bad key"}}'))
    fake.default = Answer({"facts": [FACTS["facts"][2]]})
    config = llm_config(short_tmp, fake)
    daemon, peer = await start(nursery, config)
    await observe_all(peer, ALICE)
    parked = await wait_extraction(peer, lambda s: s["parked_sessions"] == 1)
    assert "LlmRefused" in parked["last_error"] and len(fake.seen) == 1
    await trio.to_thread.run_sync(lambda: jobs_command.run(config, action="retry", out=open("/dev/null", "w")))
    assert daemon.extraction is not None
    daemon.extraction.notify()  # a running daemon would see it at its next poll
    await wait_extraction(peer, idle_after(1))
    assert [m["content"] for m in await call_ok(peer, "memory.list", ALICE)] == ["Alice is allergic to peanuts."]


async def test_a_server_that_keeps_failing_parks_the_job_after_max_attempts_keeping_the_messages(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Raw(500, b'{"error": "still broken"}')
    _, peer = await start(nursery, llm_config(short_tmp, fake, max_attempts=2))
    await observe_all(peer, ALICE)
    parked = await wait_extraction(peer, lambda s: s["parked_sessions"] == 1)
    # Retried once after a backoff, then parked with the reason; the messages wait for it.
    assert len(fake.seen) == 2 and "HTTP 500" in parked["last_error"]
    assert parked["pending_sessions"] == 0 and parked["failing_sessions"] == 0 and parked["messages_held"] == 6
    await call_ok(peer, "memory.observe", {**ALICE, "messages": [{"role": "user", "content": "One more thing."}]})
    await trio.sleep(0.5)
    assert len(fake.seen) == 2 and (await extraction_state(peer))["parked_sessions"] == 1


async def test_messages_and_facts_never_reach_the_log_at_info(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memoryd")
    # A server error, then the facts (one refused as a secret), then a garbage reply: every
    # path logs, none with contents.
    fake.script.append(Raw(500, b'{"error": "overloaded"}'))
    fake.default = Answer(FACTS)
    _, peer = await start(nursery, llm_config(short_tmp, fake, max_attempts=5))
    await observe_all(peer, ALICE, session_key="s1")
    await wait_extraction(peer, idle_after(1), timeout=30)
    fake.script.append(Answer("My wife Sarah loves Italian food, not JSON"))
    failed = await peer.call("memory.extract_from_messages", {**ALICE, "messages": EXCHANGES[0]})
    assert failed["error"]["code"] == -32603  # the model never answered in shape: the operator's to fix
    logged = "\n".join(f"{r.getMessage()} {getattr(r, 'fields', '')} {r.exc_text or ''}" for r in caplog.records)
    assert "extraction.done" in logged or "extracted" in logged
    for text in ("Sarah", "Italian", "Rome", "peanuts", "sk-abc", "Noted!"):
        assert text not in logged, [line for line in logged.splitlines() if text in line]


async def test_replies_that_never_decode_are_asked_again_then_park_the_job_with_the_reason(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Answer('{"facts": [{"content": "Alice is allergic')  # cut short: never decodes
    config = make_config(
        short_tmp,
        llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 1, "timeout": 5.0},
        extraction={"debounce_seconds": 0.2},
    )
    _, peer = await start(nursery, config)
    await observe_all(peer, ALICE)
    parked = await wait_extraction(peer, lambda s: s["parked_sessions"] == 1)
    assert len(fake.seen) == 2 and parked["last_error"].startswith("LlmBadReply")
    assert await call_ok(peer, "memory.list", ALICE) == []


async def test_an_llm_that_hangs_never_slows_add_observe_or_search(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Answer({"facts": []}, delay=30)
    _, peer = await start(nursery, llm_config(short_tmp, fake, debounce_seconds=0))
    await call_ok(peer, "memory.observe", {**ALICE, "messages": EXCHANGES[0]})
    with trio.fail_after(5):
        while not fake.seen:
            await trio.sleep(0.02)
    # The extraction is in flight (held by the server); the other methods answer meanwhile.
    with trio.fail_after(5):
        await call_ok(peer, "memory.add", {**ALICE, "content": "likes tea"})
        await call_ok(peer, "memory.observe", {**ALICE, "messages": EXCHANGES[1]})
        assert await call_ok(peer, "memory.search", {**ALICE, "query": "tea"})
    fake.stopping.set()


async def test_extract_from_messages_stores_now_and_answers_ash_shape(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Answer(FACTS)
    _, peer = await start(nursery, llm_config(short_tmp, fake))
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "alice is allergic to peanuts", "shared": True})
    reply = await call_ok(
        peer,
        "memory.extract_from_messages",
        {
            **ALICE,
            "messages": [m for exchange in EXCHANGES for m in exchange],
            "source_username": "alice",
            "chat_type": "group",
            "shared": True,
            "message_id": "m5",
        },
    )
    assert reply["stored"] == 2 and len(reply["ids"]) == 2
    assert reply["refreshed"] == [added["id"]]  # normalized-text duplicate of a live memory
    for memory_id in reply["ids"]:
        memory = await call_ok(peer, "memory.get", {**BOB, "memory_id": memory_id})
        assert memory["scope"] == "group" and memory["source_message_id"] == "m5"
    assert fake.seen[0].prompt.count("My wife Sarah") == 1


async def test_extract_reads_the_observed_session_around_the_message(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Answer({"facts": [FACTS["facts"][0]]})
    _, peer = await start(nursery, llm_config(short_tmp, fake, debounce_seconds=3600, context_messages=1))
    await observe_all(peer, ALICE, session_key="s1")
    reply = await call_ok(peer, "memory.extract", {**ALICE, "message_id": "m3", "session_key": "s1"})
    assert reply["stored"] == 1
    asked = fake.seen[0].prompt
    assert "Noted!" in asked and "Rome" in asked and "Have a good trip." in asked
    assert "Sarah loves" not in asked and "peanuts" not in asked
    (memory,) = await call_ok(peer, "memory.list", ALICE)
    assert memory["source_message_id"] == "m3" and memory["source_session"] == "s1"
    missing = await call_ok(peer, "memory.extract", {**ALICE, "message_id": "nope"})
    assert missing["stored"] == 0 and missing["error"] == "Message not found in session"
    # Bob's call never reads Alice's session.
    assert (await call_ok(peer, "memory.extract", {**BOB, "message_id": "m3"}))["stored"] == 0
    assert len(fake.seen) == 1


async def test_an_llm_slower_than_the_request_deadline_but_within_its_timeout_still_answers(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    # A local model may take longer than limits.request_timeout; llm.timeout is what bounds it.
    fake.default = Answer({"facts": [FACTS["facts"][2]]}, delay=1.5)
    config = make_config(
        short_tmp,
        llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0, "timeout": 10.0},
        limits={"request_timeout": 0.5},
    )
    _, peer = await start(nursery, config)
    reply = await call_ok(peer, "memory.extract_from_messages", {**ALICE, "messages": EXCHANGES[2]})
    assert reply["stored"] == 1


async def test_the_clients_extract_methods_outwait_their_own_timeout_unless_told(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    # The daemon gives these two methods its LLM's longest call; the client's per-call timeout
    # (here 0.5 s) is for the others.
    fake.default = Answer({"facts": [FACTS["facts"][2]]}, delay=1.5)
    config = make_config(
        short_tmp, llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0, "timeout": 10.0}
    )
    await start(nursery, config)
    async with AsyncMemoryClient(socket_path=str(config.socket_path), user_id="alice", timeout=0.5) as client:
        reply = await client.extract_from_messages(EXCHANGES[2])
        assert reply["stored"] == 1
        with pytest.raises(RequestTimeout, match="within 0.2 s"):
            await client.extract_from_messages(EXCHANGES[2], timeout=0.2)
    with MemoryClient(socket_path=str(config.socket_path), user_id="alice", timeout=0.5) as sync_client:
        reply = await trio.to_thread.run_sync(lambda: sync_client.extract_from_messages(EXCHANGES[2]))
        assert "stored" in reply
        with pytest.raises(RequestTimeout, match="within 0.2 s"):
            await trio.to_thread.run_sync(lambda: sync_client.extract_from_messages(EXCHANGES[2], timeout=0.2))


async def test_an_llm_error_in_extract_from_messages_is_reported(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Raw(503, b"{}")
    _, peer = await start(nursery, llm_config(short_tmp, fake))
    reply = await peer.call("memory.extract_from_messages", {**ALICE, "messages": EXCHANGES[0]})
    assert reply["error"]["code"] == -32007


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": "x" * (16 * 1024 + 1)}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": "a\x00b"}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": "x"}] * 101}, "messages"),
        ({"messages": [{"role": "user", "content": "x", "colour": 1}]}, "messages[0].colour"),
        ({"messages": [{"role": "user", "content": "x"}], "session_key": ""}, "session_key"),
    ],
)
async def test_observe_rejects_bad_input_naming_the_field(daemon: Daemon, params: dict[str, Any], field: str) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    reply = await peer.call("memory.observe", {**ALICE, **params})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["field"] == field


async def test_memory_add_refuses_a_secret_without_echoing_it(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    secret = "ghp_" + "a1B2c3D4e5" * 4
    reply = await peer.call("memory.add", {**ALICE, "content": f"my github token is {secret}"})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["field"] == "content" and "api_key" in reply["error"]["data"]["reason"]
    assert secret not in json.dumps(reply)
    assert await call_ok(peer, "memory.list", ALICE) == []
    health = await call_ok(peer, "system.health", {})
    assert health["secrets"] == {"mode": "refuse", "refused": 1, "redacted": 0, "by_kind": {"api_key": 1}}


async def test_memory_add_redacts_a_secret_in_redact_mode(short_tmp: Path, nursery: trio.Nursery) -> None:
    _, peer = await start(nursery, make_config(short_tmp, extraction={"secrets": "redact"}))
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "wifi password is hunter2x"})
    memory = await call_ok(peer, "memory.get", {**ALICE, "memory_id": added["id"]})
    assert memory["content"] == "wifi password is [redacted]"
    assert (await call_ok(peer, "system.health", {}))["secrets"]["redacted"] == 1


async def test_both_clients_observe_and_extract(short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm) -> None:
    from memoryd_client import AsyncMemoryClient, MemoryClient

    fake.default = Answer({"facts": [FACTS["facts"][2]]})
    config = llm_config(short_tmp, fake, debounce_seconds=3600)
    await start(nursery, config)
    socket_path = str(config.socket_path)
    async with AsyncMemoryClient(socket_path, user_id="alice", chat_id="chat-1") as client:
        assert await client.observe(EXCHANGES[2], session_key="s1") == {"accepted": 2}
        extracted = await client.extract("m5", session_key="s1")
        assert extracted["stored"] == 1
        missing = await client.extract("nope")
        assert missing["error"] == "Message not found in session"

    def sync_calls() -> dict[str, Any]:
        with MemoryClient(socket_path, user_id="bob", chat_id="chat-1") as client:
            assert client.observe(EXCHANGES[0]) == {"accepted": 2}
            result: dict[str, Any] = client.extract_from_messages(EXCHANGES[2], source_username="bob")
            return result

    from_messages = await trio.to_thread.run_sync(sync_calls)
    assert from_messages["stored"] == 1 and from_messages["refreshed"] == []


async def test_with_the_local_model_a_paraphrase_refreshes_and_a_new_fact_keeps_its_vector(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm, local_embedder: Any
) -> None:
    fake.default = Answer({"facts": [
        {"content": "Sarah, Alice's wife, loves Italian food.", "memory_type": "relationship", "confidence": 0.9},
        {"content": "Alice likes black tea.", "memory_type": "preference", "confidence": 0.9},
    ]})  # fmt: skip
    config = make_config(
        short_tmp,
        embedder="local",
        llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0},
    )
    daemon = Daemon(config, embedder=local_embedder)
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    wife = await call_ok(peer, "memory.add", {**ALICE, "content": "Alice's wife Sarah loves Italian food."})
    await call_ok(peer, "memory.add", {**ALICE, "content": "Alice likes green tea."})
    # On a busy machine an add may answer before its embedding is done (add_wait): the backfill
    # finishes it.  Let it, so the count below is the extraction's alone.
    await drained(peer)
    reply = await call_ok(peer, "memory.extract_from_messages", {**ALICE, "messages": EXCHANGES[0]})
    assert reply["refreshed"] == [wife["id"]] and reply["stored"] == 1
    health = await call_ok(peer, "system.health", {})
    assert health["backlog"]["embed"] == 0
    (hit, *_) = await call_ok(peer, "memory.search", {**ALICE, "query": "which tea does she drink, black?"})
    assert hit["content"] == "Alice likes black tea." and hit["similarity"] > 0.5


async def test_an_extracted_fact_supersedes_the_memory_it_contradicts(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Answer(
        {"facts": [{"content": "My favorite color is blue", "memory_type": "preference", "confidence": 0.9}]}
    )
    # The offline rules decide inline (an LLM decider would queue a job): force them.
    config = make_config(short_tmp, llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0})
    config = msgspec.structs.replace(config, supersession=msgspec.structs.replace(config.supersession, decider="rules"))
    _, peer = await start(nursery, config)
    red = await call_ok(peer, "memory.add", {**ALICE, "content": "My favorite color is red"})
    reply = await call_ok(peer, "memory.extract_from_messages", {**ALICE, "messages": EXCHANGES[0]})
    assert reply["stored"] == 1
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "favorite color"})
    assert [hit["content"] for hit in hits] == ["My favorite color is blue"]
    history = await call_ok(peer, "memory.history", {**ALICE, "memory_id": reply["ids"][0]})
    assert red["id"] in [m["id"] for m in history]


async def test_extract_from_messages_refuses_a_session_key_holding_a_credential_before_asking_the_llm(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    """The session key would be stored as each memory's ``source_session``."""
    fake.default = Answer(FACTS)
    _, peer = await start(nursery, llm_config(short_tmp, fake))
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    params = {**ALICE, "messages": EXCHANGES[2], "session_key": f"session {token}"}
    reply = await peer.call("memory.extract_from_messages", params)
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["field"] == "session_key"
    assert token not in json.dumps(reply)
    assert fake.seen == [] and await call_ok(peer, "memory.list", ALICE) == []
    stored = await call_ok(peer, "memory.extract_from_messages", {**params, "session_key": "s-ok"})
    assert stored["stored"] >= 1


async def test_memory_extract_stores_nothing_from_messages_erased_while_the_llm_answered(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    # memory.extract read the session's messages, then forget_all erased them while the model
    # answered: the facts come from erased messages and must not be stored.
    gate = threading.Event()

    def held(seen: Seen) -> Answer:
        gate.wait(10)
        return Answer({"facts": [FACTS["facts"][2]]})

    fake.script.append(held)
    _, peer = await start(nursery, llm_config(short_tmp, fake, debounce_seconds=3600))
    await observe_all(peer, ALICE, session_key="s1")
    other = await NdjsonPeer.connect(short_tmp / "memoryd.sock")
    replies: list[dict[str, Any]] = []

    async def extract() -> None:
        replies.append(await call_ok(other, "memory.extract", {**ALICE, "message_id": "m5", "session_key": "s1"}))

    async with trio.open_nursery() as calls:
        calls.start_soon(extract)
        with trio.fail_after(10):
            while not fake.seen:
                await trio.sleep(0.02)
        await call_ok(peer, "memory.forget_all", {**ALICE, "confirm": True, "include_group": True})
        gate.set()
    assert replies[0]["stored"] == 0 and replies[0]["ids"] == []
    assert await call_ok(peer, "memory.list", ALICE) == []
    assert await call_ok(peer, "memory.search", {**ALICE, "query": "peanuts"}) == []


async def extract_while_erasing(
    fake: FakeLlm, extracting: NdjsonPeer, erasing: NdjsonPeer, erased: dict[str, Any]
) -> dict[str, Any]:
    """alice's memory.extract_from_messages through ``extracting``, with ``erased``'s
    memory.forget_all answered through ``erasing`` while the model is still answering."""
    gate = threading.Event()

    def held(seen: Seen) -> Answer:
        gate.wait(10)
        return Answer({"facts": [FACTS["facts"][2]]})

    fake.script.append(held)
    asked = len(fake.seen)
    replies: list[dict[str, Any]] = []

    async def extract() -> None:
        params = {**ALICE, "messages": EXCHANGES[2], "source_username": "alice"}
        replies.append(await call_ok(extracting, "memory.extract_from_messages", params))

    async with trio.open_nursery() as calls:
        calls.start_soon(extract)
        with trio.fail_after(10):
            while len(fake.seen) == asked:
                await trio.sleep(0.02)
        await call_ok(erasing, "memory.forget_all", {**erased, "confirm": True, "include_group": True})
        gate.set()
    return replies[0]


async def test_extract_from_messages_stores_nothing_once_the_user_was_erased_while_the_llm_answered(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    # The messages come in the request and are never stored: what the model learned from them
    # is the user's, and an erasure that answered success must leave none of it, also from a
    # call that was in flight.  Another user's erasure, or one before the call, stops nothing.
    _, peer = await start(nursery, llm_config(short_tmp, fake, debounce_seconds=3600))
    other = await NdjsonPeer.connect(short_tmp / "memoryd.sock")
    await call_ok(peer, "memory.forget_all", {**ALICE, "confirm": True})  # before: no matter
    kept = await extract_while_erasing(fake, other, peer, BOB)
    assert kept["stored"] == 1
    await call_ok(peer, "memory.add", {**ALICE, "content": "alice plays the cello"})

    erased = await extract_while_erasing(fake, other, peer, ALICE)
    assert erased == {"stored": 0, "ids": [], "refreshed": []}
    assert await call_ok(peer, "memory.list", ALICE) == []
    assert await call_ok(peer, "memory.search", {**ALICE, "query": "peanuts"}) == []
