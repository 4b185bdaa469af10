"""Supersession decided by an LLM (a fake one on loopback), after memory.add answered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from memoryd.config import LlmConfig, SupersessionConfig
from memoryd.errors import ConfigError
from memoryd.server.daemon import Daemon
from tests.conftest import make_config
from tests.fake_llm import Answer, FakeLlm, Raw
from tests.wire import NdjsonPeer, call_ok, drained

ALICE = {"user_id": "alice"}


def llm_daemon(base: Path, fake: FakeLlm, decider: str = "auto") -> Daemon:
    config = make_config(base)
    llm = LlmConfig(provider="openai", url=fake.url, model="fake", retries=0, timeout=5.0)
    return Daemon(
        msgspec.structs.replace(config, llm=llm, supersession=SupersessionConfig(decider=decider))  # type: ignore[arg-type]
    )


@pytest.fixture
async def peer(short_tmp: Path, fake: FakeLlm, nursery: trio.Nursery) -> AsyncIterator[NdjsonPeer]:
    daemon = llm_daemon(short_tmp, fake)
    await nursery.start(daemon.run)
    yield await NdjsonPeer.connect(daemon.config.socket_path)
    daemon.request_stop()


async def decided(peer: NdjsonPeer, memory_id: str, versions: int) -> list[dict[str, Any]]:
    """The history of ``memory_id`` once it has ``versions`` entries (the worker is async)."""
    with trio.fail_after(10):
        while True:
            chain: list[dict[str, Any]] = await call_ok(peer, "memory.history", {**ALICE, "memory_id": memory_id})
            if len(chain) >= versions:
                return chain
            await trio.sleep(0.02)


async def test_the_model_says_conflict_and_the_older_memory_is_superseded(peer: NdjsonPeer, fake: FakeLlm) -> None:
    fake.script.append(Answer({"decision": "conflict", "reason": "new favorite"}))
    red = await call_ok(peer, "memory.add", {**ALICE, "content": "My favorite color is red"})
    blue = await call_ok(peer, "memory.add", {**ALICE, "content": "My favorite color is blue"})
    assert blue["superseded"] == []  # decided after the reply, never inside memory.add
    chain = await decided(peer, blue["id"], 2)
    assert [m["id"] for m in chain] == [red["id"], blue["id"]]
    assert chain[0]["supersede_reason"] == "new favorite"
    asked = fake.seen[0].prompt
    assert "My favorite color is red" in asked and "My favorite color is blue" in asked
    # Both dates go with the texts, so the model can tell which is newer.
    assert f"Older memory (recorded {red['created_at']})" in asked
    assert f"Newer memory (recorded {blue['created_at']})" in asked
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "favorite color"})
    assert [h["id"] for h in hits] == [blue["id"]]


async def test_the_model_says_coexist_and_both_stay(peer: NdjsonPeer, fake: FakeLlm) -> None:
    fake.script.append(Answer({"decision": "coexist", "reason": "both can hold"}))
    red = await call_ok(peer, "memory.add", {**ALICE, "content": "My favorite color is red"})
    blue = await call_ok(peer, "memory.add", {**ALICE, "content": "My favorite color is blue"})
    await drained(peer, "supersede")  # the worker decided every queued supersession
    assert len(fake.seen) == 1
    listed = await call_ok(peer, "memory.list", ALICE)
    assert {m["id"] for m in listed} == {red["id"], blue["id"]}


async def test_a_failing_model_falls_back_to_the_rules(peer: NdjsonPeer, fake: FakeLlm) -> None:
    fake.default = Raw(500, b'{"error": "down"}')
    red = await call_ok(peer, "memory.add", {**ALICE, "content": "My favorite color is red"})
    blue = await call_ok(peer, "memory.add", {**ALICE, "content": "My favorite color is blue"})
    chain = await decided(peer, blue["id"], 2)
    assert [m["id"] for m in chain] == [red["id"], blue["id"]]
    assert chain[0]["supersede_reason"].startswith("LLM failed")


async def test_structural_rules_are_not_put_to_the_model(peer: NdjsonPeer, fake: FakeLlm) -> None:
    fake.default = Answer({"decision": "conflict", "reason": "the model would say so"})
    general = await call_ok(peer, "memory.add", {**ALICE, "content": "My favorite color is red"})
    about_sarah = await call_ok(
        peer, "memory.add", {**ALICE, "content": "Her favorite color is blue", "subjects": ["Sarah"]}
    )
    # The subjects differ, so they are not even candidates: no request, both stay.
    await drained(peer, "supersede")
    assert fake.seen == []
    listed = await call_ok(peer, "memory.list", ALICE)
    assert {m["id"] for m in listed} == {general["id"], about_sarah["id"]}


async def test_explicit_supersedes_is_inline_even_with_a_model(peer: NdjsonPeer, fake: FakeLlm) -> None:
    old = await call_ok(peer, "memory.add", {**ALICE, "content": "Standup is at 9:30"})
    new = await call_ok(peer, "memory.add", {**ALICE, "content": "Standup is at 10", "supersedes": old["id"]})
    assert new["superseded"] == [old["id"]]


async def test_decider_llm_without_a_provider_stops_start_up(short_tmp: Path) -> None:
    config = msgspec.structs.replace(make_config(short_tmp), supersession=SupersessionConfig(decider="llm"))
    with pytest.raises(ConfigError, match="supersession.decider"):
        await Daemon(config).run()


async def test_the_model_is_never_asked_about_another_scopes_memory(peer: NdjsonPeer, fake: FakeLlm) -> None:
    fake.default = Answer({"decision": "conflict", "reason": "always conflict"})
    bob = {"user_id": "bob"}
    bobs = await call_ok(peer, "memory.add", {**bob, "content": "My favorite color is red"})
    group = await call_ok(
        peer, "memory.add", {**ALICE, "chat_id": "c1", "shared": True, "content": "My favorite color is green"}
    )
    mine = await call_ok(peer, "memory.add", {**ALICE, "content": "My favorite color is blue"})
    await drained(peer, "supersede")
    assert fake.seen == []
    assert [m["id"] for m in await call_ok(peer, "memory.list", bob)] == [bobs["id"]]
    listed = await call_ok(peer, "memory.list", {**ALICE, "chat_id": "c1"})
    assert {m["id"] for m in listed} == {group["id"], mine["id"]}
