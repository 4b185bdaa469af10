"""memory.context and memory.summary through the socket: offline digest, and a fake LLM's narrative."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from memoryd.server.daemon import Daemon
from tests.conftest import make_config
from tests.fake_llm import Answer, FakeLlm, Raw, Seen
from tests.wire import NdjsonPeer, call_ok

ALICE = {"user_id": "alice"}


async def add(peer: NdjsonPeer, content: str, **params: Any) -> str:
    memory_id: str = (await call_ok(peer, "memory.add", {**ALICE, **params, "content": content}))["id"]
    return memory_id


async def seed(peer: NdjsonPeer) -> None:
    await add(peer, "My wife's name is Sarah")
    await add(peer, "Sarah likes Italian food")
    await add(peer, "I like hiking in the Alps")
    await add(peer, "Tom is my boss")


async def test_context_answers_memories_people_summary_and_a_block(peer: NdjsonPeer) -> None:
    await seed(peer)
    # Keyword-only, "Sarah likes Italian food" shares no word with the message: its relevance is
    # low, so the block's composition is checked with no threshold.
    context = await call_ok(
        peer, "memory.context", {**ALICE, "message": "what should I cook for my wife tonight?", "min_relevance": 0}
    )
    assert [p["name"] for p in context["people"]] == ["Sarah"]
    assert context["people"][0]["relationship"] == "wife"
    assert context["memories"][0]["content"] == "Sarah likes Italian food"
    assert "Sarah (wife)" in context["summary"] and "Tom (boss)" in context["summary"]
    text = context["text"]
    assert text.startswith("About the user:")
    assert "People mentioned:\n- Sarah (wife)" in text
    assert "Relevant memories:\n- Sarah likes Italian food (about Sarah)" in text
    assert len(text) <= 2000


@pytest.mark.parametrize("max_chars", [100, 150, 300, 1000])
async def test_context_text_stays_under_max_chars_best_first(peer: NdjsonPeer, max_chars: int) -> None:
    await seed(peer)
    for i in range(30):
        await add(peer, f"Sarah once said something memorable about topic number {i}")
    context = await call_ok(
        peer, "memory.context", {**ALICE, "message": "what does my wife like?", "limit": 20, "max_chars": max_chars}
    )
    text = context["text"]
    assert len(text) <= max_chars
    assert text.startswith("About the user:") or text.startswith("People mentioned:")
    assert "- Sarah (wife)" in text  # the person named in the message survives any cut


async def test_context_for_a_stranger_is_empty(peer: NdjsonPeer) -> None:
    await seed(peer)
    context = await call_ok(peer, "memory.context", {"user_id": "mallory", "message": "what does my wife like?"})
    assert context == {"memories": [], "people": [], "summary": "", "text": ""}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "message"),
        ({"message": " "}, "message"),
        ({"message": "x", "max_chars": 10}, "max_chars"),
        ({"message": "x", "limit": 0}, "limit"),
    ],
)
async def test_bad_context_params_name_the_field(peer: NdjsonPeer, params: dict[str, Any], field: str) -> None:
    reply = await peer.call("memory.context", {**ALICE, **params})
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["field"] == field


async def test_offline_summary_is_a_digest_by_person_and_type_and_never_stale(peer: NdjsonPeer) -> None:
    await seed(peer)
    first = await call_ok(peer, "memory.summary", ALICE)
    assert first["source"] == "digest" and first["stale"] is False and first["memories"] == 4
    lines = first["summary"].splitlines()
    assert lines[0] == "Sarah (wife): Sarah likes Italian food; My wife's name is Sarah."
    assert lines[1] == "Tom (boss): Tom is my boss."
    assert lines[2] == "Knowledge: I like hiking in the Alps."
    assert await call_ok(peer, "memory.summary", ALICE) == first  # cached: same text, same time
    gone = await add(peer, "I moved to Vienna")
    second = await call_ok(peer, "memory.summary", ALICE)
    assert "I moved to Vienna" in second["summary"]
    await call_ok(peer, "memory.delete", {**ALICE, "memory_id": gone})
    assert "Vienna" not in (await call_ok(peer, "memory.summary", ALICE))["summary"]
    await call_ok(peer, "memory.forget_person", {**ALICE, "person": "Tom"})
    assert "Tom" not in (await call_ok(peer, "memory.summary", ALICE))["summary"]


async def test_a_memory_that_expired_leaves_the_cached_summary(peer: NdjsonPeer) -> None:
    # Nothing is deleted when a memory expires, yet the summary built while it was live must
    # not keep serving it.
    await seed(peer)
    reply = await call_ok(
        peer, "memory.add", {**ALICE, "content": "The gate code is 4321", "expires_days": 1.5 / 86400}
    )
    first = await call_ok(peer, "memory.summary", ALICE)
    assert "4321" in first["summary"]
    assert reply["expires_at"] is not None
    with trio.fail_after(10):
        while any("4321" in memory["content"] for memory in await call_ok(peer, "memory.list", ALICE)):
            await trio.sleep(0.1)
    later = await call_ok(peer, "memory.summary", ALICE)
    assert "4321" not in later["summary"] and "Sarah" in later["summary"]


async def test_the_summary_can_be_left_out_of_the_context(peer: NdjsonPeer) -> None:
    await seed(peer)
    unrelated = {**ALICE, "message": "What is the capital of Mongolia?"}
    # By default the owner's summary (offline: a digest of the newest facts) comes whatever the
    # message is about; the relevance threshold decides only the memories.
    default = await call_ok(peer, "memory.context", unrelated)
    assert default["memories"] == [] and default["text"].startswith("About the user:")
    assert "hiking in the Alps" in default["summary"]
    left_out = await call_ok(peer, "memory.context", {**unrelated, "include_summary": False})
    assert left_out == {"memories": [], "people": [], "summary": "", "text": ""}
    # The people the message names still come, under their own heading.
    named = await call_ok(
        peer, "memory.context", {**ALICE, "message": "what does my wife like?", "include_summary": False}
    )
    assert named["summary"] == "" and named["text"].startswith("People mentioned:\n- Sarah (wife)")
    assert "About the user:" not in named["text"]
    assert (await call_ok(peer, "memory.context", {**unrelated, "include_summary": True})) == default


async def test_the_summary_default_is_a_config_key_a_call_overrides(short_tmp: Path, nursery: trio.Nursery) -> None:
    config = make_config(short_tmp)
    config = msgspec.structs.replace(config, context=msgspec.structs.replace(config.context, include_summary=False))
    instance = Daemon(config)
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    await seed(peer)
    unrelated = {**ALICE, "message": "What is the capital of Mongolia?"}
    assert (await call_ok(peer, "memory.context", unrelated))["text"] == ""
    wanted = await call_ok(peer, "memory.context", {**unrelated, "include_summary": True})
    assert wanted["text"].startswith("About the user:") and "Tom (boss)" in wanted["summary"]
    instance.request_stop()


@pytest.mark.parametrize("value", ["no", 0, None, [True]])
async def test_include_summary_must_be_a_boolean(peer: NdjsonPeer, value: Any) -> None:
    params = {**ALICE, "message": "hi", "include_summary": value}
    if value is None:  # null is the same as leaving it out: the daemon's default
        assert (await call_ok(peer, "memory.context", params))["text"] == ""
        return
    reply = await peer.call("memory.context", params)
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["field"] == "include_summary"


# -- with an LLM -------------------------------------------------------------------------------


@pytest.fixture
async def llm_daemon(short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm) -> AsyncIterator[Daemon]:
    config = make_config(short_tmp)
    config = msgspec.structs.replace(
        config,
        llm=msgspec.structs.replace(config.llm, provider="openai", url=fake.url, model="m", retries=0, timeout=5.0),
        summary=msgspec.structs.replace(config.summary, debounce_seconds=1.0),
    )
    instance = Daemon(config)
    await nursery.start(instance.run)
    yield instance
    instance.request_stop()


async def wait_rebuilt(daemon: Daemon, count: int) -> None:
    summaries = daemon.summaries
    assert summaries is not None
    with trio.fail_after(10):
        while summaries.rebuilt < count:
            await trio.sleep(0.02)


async def test_llm_summary_is_a_narrative_written_in_the_background(llm_daemon: Daemon, fake: FakeLlm) -> None:
    peer = await NdjsonPeer.connect(llm_daemon.config.socket_path)
    await seed(peer)
    fake.script.append(Answer({"summary": "The user is married to Sarah, who loves Italian food."}))
    first = await call_ok(peer, "memory.summary", ALICE)  # never waits for the model
    assert first["source"] == "digest" and first["summary"].startswith("Sarah (wife):") and first["stale"] is True
    await wait_rebuilt(llm_daemon, 1)
    narrative = await call_ok(peer, "memory.summary", ALICE)
    assert narrative == {
        **narrative,
        "source": "llm",
        "stale": False,
        "summary": "The user is married to Sarah, who loves Italian food.",
    }
    asked = fake.seen[-1].prompt
    assert "Sarah (wife)" in asked and "Sarah likes Italian food" in asked and "hiking" in asked

    fake.script.append(Answer({"summary": "The user lives in Vienna with Sarah."}))
    await add(peer, "I moved to Vienna")
    await add(peer, "I work at Acme")  # within the debounce: one rebuild for both
    stale = await call_ok(peer, "memory.summary", ALICE)
    assert stale["summary"].startswith("The user is married") and stale["stale"] is True
    await wait_rebuilt(llm_daemon, 2)
    fresh = await call_ok(peer, "memory.summary", ALICE)
    assert fresh["summary"] == "The user lives in Vienna with Sarah." and fresh["stale"] is False
    assert "I moved to Vienna" in fake.seen[-1].prompt and "I work at Acme" in fake.seen[-1].prompt
    assert len(fake.seen) == 2

    context = await call_ok(peer, "memory.context", {**ALICE, "message": "where do we live?"})
    assert context["summary"] == fresh["summary"] and "The user lives in Vienna with Sarah." in context["text"]


async def test_a_failing_llm_keeps_the_digest(llm_daemon: Daemon, fake: FakeLlm) -> None:
    peer = await NdjsonPeer.connect(llm_daemon.config.socket_path)
    await seed(peer)
    fake.script.append(Raw(500, b'{"error": "down"}'))
    await call_ok(peer, "memory.summary", ALICE)
    await wait_rebuilt(llm_daemon, 1)
    result = await call_ok(peer, "memory.summary", ALICE)
    assert result["source"] == "digest" and result["summary"].startswith("Sarah (wife):")
    assert result["stale"] is False and len(fake.seen) == 1


def held(gate: threading.Event, answer: Answer) -> Callable[[Seen], Answer]:
    """A script item that answers only once ``gate`` is set: the model is still writing."""

    def wait(seen: Seen) -> Answer:
        gate.wait(10)
        return answer

    return wait


@pytest.mark.parametrize("change", ["delete", "forget_person"])
async def test_a_narrative_written_while_a_memory_was_deleted_is_never_served(
    llm_daemon: Daemon, fake: FakeLlm, change: str
) -> None:
    # The model was asked before the delete and answers after it: its narrative quotes what the
    # user deleted, so it must not be served (nor cached as fresh); the next one is built
    # without it.
    peer = await NdjsonPeer.connect(llm_daemon.config.socket_path)
    await seed(peer)
    sailing = await add(peer, "Tom and I go sailing on Lake Geneva")
    gate = threading.Event()
    fake.script.append(held(gate, Answer({"summary": "The user goes sailing on Lake Geneva with Tom."})))
    fake.default = Answer({"summary": "The user is married to Sarah."})
    await call_ok(peer, "memory.summary", ALICE)
    with trio.fail_after(10):
        while not fake.seen:
            await trio.sleep(0.02)
    if change == "delete":
        await call_ok(peer, "memory.delete", {**ALICE, "memory_id": sailing})
    else:
        await call_ok(peer, "memory.forget_person", {**ALICE, "person": "Tom"})
    gate.set()
    await wait_rebuilt(llm_daemon, 1)
    after = await call_ok(peer, "memory.summary", ALICE)
    assert "sailing" not in after["summary"]
    await wait_rebuilt(llm_daemon, 2)
    rebuilt = await call_ok(peer, "memory.summary", ALICE)
    assert rebuilt["summary"] == "The user is married to Sarah." and rebuilt["stale"] is False
    assert "sailing" not in fake.seen[-1].prompt


async def test_a_memory_added_while_the_narrative_was_written_is_in_the_next_one(
    llm_daemon: Daemon, fake: FakeLlm
) -> None:
    # The narrative under way cannot know of the add: it is answered as stale, and rewritten.
    peer = await NdjsonPeer.connect(llm_daemon.config.socket_path)
    await seed(peer)
    gate = threading.Event()
    fake.script.append(held(gate, Answer({"summary": "The user is married to Sarah."})))
    fake.script.append(Answer({"summary": "The user is married to Sarah and lives in Vienna."}))
    await call_ok(peer, "memory.summary", ALICE)
    with trio.fail_after(10):
        while not fake.seen:
            await trio.sleep(0.02)
    await add(peer, "I moved to Vienna")
    gate.set()
    await wait_rebuilt(llm_daemon, 1)
    written = await call_ok(peer, "memory.summary", ALICE)
    assert written["summary"] == "The user is married to Sarah." and written["stale"] is True
    await wait_rebuilt(llm_daemon, 2)
    assert "I moved to Vienna" in fake.seen[-1].prompt
    assert (await call_ok(peer, "memory.summary", ALICE))["stale"] is False


async def test_memories_the_maintenance_pass_evicted_leave_the_cached_summary(
    llm_daemon: Daemon, fake: FakeLlm
) -> None:
    # Nothing is added after the narrative: only the eviction can make it go, and it must (the
    # narrative quotes what was evicted); the next call answers a digest built from the store.
    peer = await NdjsonPeer.connect(llm_daemon.config.socket_path)
    await seed(peer)
    await add(peer, "Tom and I go sailing on Lake Geneva")
    fake.script.append(Answer({"summary": "The user goes sailing with Tom and is married to Sarah."}))
    fake.default = Answer({"summary": "The user likes hiking."})
    await call_ok(peer, "memory.summary", ALICE)
    await wait_rebuilt(llm_daemon, 1)
    narrative = await call_ok(peer, "memory.summary", ALICE)
    assert narrative["source"] == "llm" and narrative["memories"] == 5

    maintenance = llm_daemon.maintenance
    assert maintenance is not None
    maintenance.settings = msgspec.structs.replace(maintenance.settings, max_entries_per_user=2, protect_recent_days=0)
    runs = maintenance.runs
    maintenance.run_now()
    passed = await maintenance.wait_for_runs(runs + 1)
    assert passed is not None and passed["evicted"] == 3
    after = await call_ok(peer, "memory.summary", ALICE)
    assert after["source"] == "digest" and after["memories"] == 2
    assert "sailing with Tom" not in after["summary"]
