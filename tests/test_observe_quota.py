"""memory.observe has per-user bounds: messages and bytes per minute, sessions per hour, and
sessions waiting for extraction; each refusal is -32003 with retry_after, stores nothing, and
leaves other users alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from memoryd.server.daemon import Daemon
from memoryd.service.observe_quota import ObserveLimits, ObserveQuota
from tests.conftest import make_config
from tests.fake_llm import Answer, FakeLlm
from tests.store_helpers import sql
from tests.wire import NdjsonPeer, call_error, call_ok

ALICE = {"user_id": "alice"}
BOB = {"user_id": "bob"}


def messages(count: int, text: str = "hello there") -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"{text} {i}"} for i in range(count)]


async def start(base: Path, nursery: trio.Nursery, **overrides: Any) -> tuple[Daemon, NdjsonPeer]:
    daemon = Daemon(make_config(base, **overrides))
    await nursery.start(daemon.run)
    return daemon, await NdjsonPeer.connect(daemon.config.socket_path)


def held(daemon: Daemon) -> int:
    return int(sql(daemon.config.db_path, "SELECT count(*) FROM observed_messages")[0][0])


def assert_overloaded(error: dict[str, Any], limit: str, most: float) -> None:
    assert error["code"] == -32003, error
    assert error["data"]["limit"] == limit
    assert 0 < error["data"]["retry_after"] <= most


async def test_messages_per_minute_are_bounded_per_user(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon, peer = await start(short_tmp, nursery, limits={"observe_messages_per_minute": 5})
    await call_ok(peer, "memory.observe", {**ALICE, "session_key": "s", "messages": messages(3)})
    error = await call_error(peer, "memory.observe", {**ALICE, "session_key": "s", "messages": messages(3)})
    assert_overloaded(error, "observe_messages_per_minute", 60)
    assert held(daemon) == 3
    await call_ok(peer, "memory.observe", {**ALICE, "session_key": "s", "messages": messages(2)})
    await call_ok(peer, "memory.observe", {**BOB, "session_key": "s", "messages": messages(5)})
    error = await call_error(peer, "memory.observe", {**ALICE, "session_key": "s", "messages": messages(6)})
    assert error["code"] == -32602 and error["data"]["field"] == "messages"


async def test_bytes_per_minute_are_bounded_per_user(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon, peer = await start(short_tmp, nursery, limits={"observe_bytes_per_minute": 20_000})
    big = messages(1, "x" * 9_000)
    for _ in range(2):
        await call_ok(peer, "memory.observe", {**ALICE, "session_key": "s", "messages": big})
    error = await call_error(peer, "memory.observe", {**ALICE, "session_key": "s", "messages": big})
    assert_overloaded(error, "observe_bytes_per_minute", 60)
    assert held(daemon) == 2
    await call_ok(peer, "memory.observe", {**BOB, "session_key": "s", "messages": big})


async def test_sessions_per_hour_are_bounded_per_user(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon, peer = await start(short_tmp, nursery, limits={"max_observed_sessions_per_user": 2})
    for key in ("s1", "s2"):
        await call_ok(peer, "memory.observe", {**ALICE, "session_key": key, "messages": messages(1)})
    error = await call_error(peer, "memory.observe", {**ALICE, "session_key": "s3", "messages": messages(1)})
    assert_overloaded(error, "max_observed_sessions_per_user", 3600)
    await call_ok(peer, "memory.observe", {**ALICE, "session_key": "s1", "messages": messages(1)})
    await call_ok(peer, "memory.observe", {**BOB, "session_key": "s3", "messages": messages(1)})
    assert held(daemon) == 4


async def test_sessions_waiting_for_extraction_are_bounded_per_user(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Answer({"facts": []})
    daemon, peer = await start(
        short_tmp,
        nursery,
        llm={"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0},
        extraction={"debounce_seconds": 600.0},
        limits={"max_queued_extractions_per_user": 2},
    )
    for key in ("s1", "s2"):
        await call_ok(peer, "memory.observe", {**ALICE, "session_key": key, "messages": messages(1)})
    error = await call_error(peer, "memory.observe", {**ALICE, "session_key": "s3", "messages": messages(1)})
    assert_overloaded(error, "max_queued_extractions_per_user", 700)
    # A session already waiting takes more messages; another user has a queue of their own.
    await call_ok(peer, "memory.observe", {**ALICE, "session_key": "s2", "messages": messages(1)})
    await call_ok(peer, "memory.observe", {**BOB, "session_key": "s3", "messages": messages(1)})
    jobs = sql(daemon.config.db_path, "SELECT owner, session_key FROM extraction_jobs ORDER BY owner, session_key")
    assert jobs == [("alice", "s1"), ("alice", "s2"), ("bob", "s3")]
    assert fake.seen == []


async def test_sessions_waiting_for_extraction_are_counted_in_the_store_so_a_restart_keeps_the_bound(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    """The rates and the hourly sessions are counted in the process; the sessions that wait for
    extraction (each an LLM request to come) are read from the store, so they survive a restart."""
    fake.default = Answer({"facts": []})
    settings: dict[str, Any] = {
        "llm": {"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0},
        "extraction": {"debounce_seconds": 600.0},
        "limits": {"max_queued_extractions_per_user": 2},
    }
    config = make_config(short_tmp, **settings)
    async with trio.open_nursery() as first_life:
        daemon = Daemon(config)
        await first_life.start(daemon.run)
        peer = await NdjsonPeer.connect(config.socket_path)
        for key in ("s1", "s2"):
            await call_ok(peer, "memory.observe", {**ALICE, "session_key": key, "messages": messages(1)})
        await peer.aclose()
        daemon.request_stop()
    daemon, peer = await start(short_tmp, nursery, **settings)
    error = await call_error(peer, "memory.observe", {**ALICE, "session_key": "s3", "messages": messages(1)})
    assert_overloaded(error, "max_queued_extractions_per_user", 700)
    assert held(daemon) == 2 and fake.seen == []


def test_the_rate_window_slides() -> None:
    now = [0.0]
    quota = ObserveQuota(
        ObserveLimits(messages_per_minute=10, bytes_per_minute=10**6, sessions=5, queued_extractions=5),
        clock=lambda: now[0],
    )
    quota.admit("u", "s", 6, 10)
    now[0] = 30.0
    quota.admit("u", "s", 4, 10)
    try:
        quota.admit("u", "s", 1, 10)
    except Exception as exc:
        assert exc.data["retry_after"] == 30.0  # type: ignore[attr-defined]
    else:
        raise AssertionError("the eleventh message in a minute was accepted")
    now[0] = 60.5
    quota.admit("u", "s", 6, 10)
