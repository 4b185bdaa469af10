"""What the method-table fuzzer (tests/test_params_fuzz.py) found mishandled, each through a real
socket: params refused by name on both storage engines with nothing stored, and forget_all while
background work (the supersession and extraction workers) waits on the LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.server.daemon import Daemon
from tests.conftest import make_config
from tests.fake_llm import Answer, FakeLlm
from tests.wire import NdjsonPeer, call_error, call_ok

ALICE = {"user_id": "alice"}


@pytest.fixture(params=["sqlite", "postgres"])
async def engine_peer(
    request: pytest.FixtureRequest, short_tmp: Path, nursery: trio.Nursery
) -> AsyncIterator[NdjsonPeer]:
    storage: dict[str, Any] = {}
    if request.param == "postgres":
        pytest.importorskip("psycopg")
        from tests.postgres_server import shared

        storage = {"storage": {"backend": "postgres", "url": shared().fresh_database()}}
    instance = Daemon(make_config(short_tmp, **storage))
    await nursery.start(instance.run)
    yield await NdjsonPeer.connect(instance.config.socket_path)
    instance.request_stop()


async def test_add_with_this_chat_and_no_chat_is_stored_and_deduplicated(engine_peer: NdjsonPeer) -> None:
    # this_chat is a filter of search and list: an add ignores it (it once reached SQLite's
    # duplicate check as "no disclosure shows", a query SQLite refused: -32603).
    peer = engine_peer
    first = await call_ok(peer, "memory.add", {**ALICE, "content": "tea at five", "this_chat": True})
    again = await call_ok(peer, "memory.add", {**ALICE, "content": "tea at five", "this_chat": True})
    assert (again["id"], again["deduplicated"]) == (first["id"], True)
    here = {**ALICE, "chat_id": "dm-al", "this_chat": True}
    in_chat = await call_ok(peer, "memory.add", {**here, "content": "tea at five"})
    assert not in_chat["deduplicated"]  # learned in another chat: a memory of its own
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "tea"})
    assert sorted(hit["id"] for hit in hits) == sorted([first["id"], in_chat["id"]])


@pytest.mark.parametrize("field", ["chat_type", "source_username", "source_display_name", "message_id"])
async def test_a_routing_field_with_a_nul_is_refused_by_name(engine_peer: NdjsonPeer, field: str) -> None:
    # Stored with the memory's provenance: PostgreSQL cannot store a NUL (it was -32603 there).
    params = {**ALICE, "content": "the spare key is under the mat", field: "a\x00b"}
    error = await call_error(engine_peer, "memory.add", params)
    assert (error["code"], error["data"]["field"]) == (-32602, field)
    assert "NUL" in error["message"]
    assert await call_ok(engine_peer, "memory.list", ALICE) == []
    # A blank routing field still means "unknown", as ash sends an unset one.
    assert await call_ok(engine_peer, "memory.add", {**params, field: " "})


@pytest.mark.parametrize(
    "field",
    ["session_key", "messages[0].id", "messages[0].username", "messages[0].display_name", "messages[0].user_id"],
)
async def test_observed_text_with_a_nul_is_refused_by_name(engine_peer: NdjsonPeer, field: str) -> None:
    message: dict[str, Any] = {"role": "user", "content": "we moved to Lisbon"}
    params: dict[str, Any] = {**ALICE, "chat_id": "dm-al", "messages": [message]}
    if field == "session_key":
        params["session_key"] = "s\x00k"
    else:
        message[field.removeprefix("messages[0].")] = "x\x00"
    error = await call_error(engine_peer, "memory.observe", params)
    assert (error["code"], error["data"]["field"]) == (-32602, field)
    assert (await call_ok(engine_peer, "system.health", {}))["status"] == "ok"


async def test_extract_from_messages_with_this_chat_and_no_chat_stores_its_facts(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    # The extracted facts are added like memory.add's: this_chat once reached the duplicate
    # check there too (-32603 with no fact stored).
    fake.default = Answer(
        {"facts": [{"content": "Alice is allergic to peanuts.", "memory_type": "identity", "confidence": 0.99}]}
    )
    config = make_config(
        short_tmp, llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0, "timeout": 5.0}
    )
    instance = Daemon(config)
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    said = {**ALICE, "this_chat": True, "messages": [{"role": "user", "content": "I am allergic to peanuts."}]}
    first = await call_ok(peer, "memory.extract_from_messages", said)
    assert first["stored"] == 1
    again = await call_ok(peer, "memory.extract_from_messages", said)
    assert (again["stored"], again["refreshed"]) == (0, first["ids"])
    instance.request_stop()


async def test_forget_all_while_the_supersession_worker_asks_the_llm(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    # The worker claims the adds' jobs in a batch and asks the LLM about each in turn; erased
    # in between, the next job's memory was a missing row that stopped the daemon.
    fake.default = Answer({"supersedes": False}, delay=0.3)
    config = make_config(
        short_tmp, llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0, "timeout": 5.0}
    )
    instance = Daemon(config)
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    for employer in ("Acme", "Globex", "Initech"):
        await call_ok(peer, "memory.add", {**ALICE, "content": f"Bob works at {employer}", "subjects": ["Bob"]})
    with trio.fail_after(10):
        while not fake.seen:  # the worker is waiting on its first answer
            await trio.sleep(0.01)
    erased = await call_ok(peer, "memory.forget_all", {**ALICE, "confirm": True})
    assert erased["erased"]["memories"] == 3
    await trio.sleep(1.0)  # the worker goes on to the erased jobs
    assert (await call_ok(peer, "system.health", {}))["status"] == "ok"
    assert await call_ok(peer, "memory.list", ALICE) == []
    instance.request_stop()


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
async def test_forget_all_while_the_extraction_worker_asks_the_llm_keeps_nothing(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm, engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    # What the worker learns from messages erased while the LLM answered must not come back,
    # and the job that lost its session is no failure of the worker's (no traceback, no retry).
    storage: dict[str, Any] = {}
    if engine == "postgres":
        pytest.importorskip("psycopg")
        from tests.postgres_server import shared

        storage = {"storage": {"backend": "postgres", "url": shared().fresh_database()}}
    fact = {"content": "Alice likes tea.", "memory_type": "preference", "confidence": 0.9}
    fake.default = Answer({"facts": [fact]}, delay=0.5)
    config = make_config(
        short_tmp,
        llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0, "timeout": 5.0},
        extraction={"debounce_seconds": 0.05},
        **storage,
    )
    instance = Daemon(config)
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    said = {**ALICE, "messages": [{"role": "user", "content": "I like tea."}]}
    assert (await call_ok(peer, "memory.observe", said))["accepted"] == 1
    with trio.fail_after(10):
        while not fake.seen:
            await trio.sleep(0.01)
    await call_ok(peer, "memory.forget_all", {**ALICE, "confirm": True})
    await trio.sleep(1.0)  # past the LLM's answer and the worker's write
    assert await call_ok(peer, "memory.list", ALICE) == []
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    health = await call_ok(peer, "system.health", {})
    assert health["extraction"]["failures_since_start"] == 0
    instance.request_stop()


@pytest.mark.parametrize("method", ["memory.list", "memory.search"])
async def test_a_memory_type_with_a_nul_is_refused_by_name(engine_peer: NdjsonPeer, method: str) -> None:
    # memory.list looks the types up in the store: PostgreSQL cannot take a NUL (it was -32603).
    params = {**ALICE, "query": "tea", "types": ["preference", "a\x00b"]}
    if method == "memory.list":
        del params["query"]
    error = await call_error(engine_peer, method, params)
    assert (error["code"], error["data"]["field"]) == (-32602, "types[1]")
