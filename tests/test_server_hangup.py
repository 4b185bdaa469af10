"""Requests do not outlive their client: a connection's queued and running calls are cancelled
when its peer hangs up (a half-close still gets its replies), and one peer uid's calls over all
its connections are capped (-32003 with retry_after past the share).

The slow calls are memory.extract_from_messages against a real loopback fake LLM that answers
after a delay, so a call's life is the LLM's delay and nothing else."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import trio

from memoryd.server.daemon import Daemon
from tests.conftest import make_config
from tests.fake_llm import Answer, FakeLlm
from tests.wire import NdjsonPeer, call_ok

ALICE = {"user_id": "alice"}
SLOW = 2.0


def slow_daemon(base: Path, fake: FakeLlm, **limits: Any) -> Daemon:
    fake.default = Answer({"facts": []}, delay=SLOW)
    config = make_config(
        base,
        llm={
            "provider": "openai",
            "url": fake.url,
            "model": "fake-model",
            "retries": 0,
            "timeout": 30.0,
            "concurrency": 2,
        },
        limits=limits,
    )
    return Daemon(config)


def extract_call(index: int) -> bytes:
    message = {"role": "user", "content": f"I like tea number {index}"}
    params = {**ALICE, "messages": [message]}
    return (
        json.dumps({"jsonrpc": "2.0", "method": "memory.extract_from_messages", "params": params, "id": index}).encode()
        + b"\n"
    )


async def server_counts(peer: NdjsonPeer) -> dict[str, Any]:
    health = await call_ok(peer, "system.health", {})
    return dict(health["server"])


async def hang_up_with_calls_sent(daemon: Daemon, calls: int, hang_up_at: int) -> dict[str, Any]:
    """Send ``calls`` slow calls on a new connection and hang up once ``hang_up_at`` requests are
    in flight (a watcher's health call among them); the server's counts once only the watcher's
    call is left, which must come within SLOW seconds (sooner than any slow call could end)."""
    watcher = await NdjsonPeer.connect(daemon.config.socket_path)
    client = await NdjsonPeer.connect(daemon.config.socket_path)
    await client.send_raw(b"".join(extract_call(i) for i in range(calls)))
    with trio.fail_after(10):
        while (await server_counts(watcher))["requests_in_flight"] < hang_up_at:
            await trio.sleep(0.02)
    await client.aclose()
    with trio.fail_after(SLOW):
        # The health call asking is in flight itself.
        while (counts := await server_counts(watcher))["requests_in_flight"] > 1:
            await trio.sleep(0.02)
    return counts


async def test_a_hang_up_cancels_the_connections_queued_and_running_calls(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    daemon = slow_daemon(short_tmp, fake)
    await nursery.start(daemon.run)
    # Twelve calls behind an LLM of concurrency 2 would take 6 rounds of SLOW seconds.
    counts = await hang_up_with_calls_sent(daemon, calls=12, hang_up_at=13)
    assert counts["calls_cancelled_by_hangup"] == 12
    await trio.sleep(SLOW)
    assert len(fake.seen) <= 4  # the two asked before the hang-up, never the queued ten


async def test_a_half_close_still_gets_every_reply(short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm) -> None:
    daemon = slow_daemon(short_tmp, fake)
    fake.default = Answer({"facts": []}, delay=0.3)
    await nursery.start(daemon.run)
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.connect(str(daemon.config.socket_path))
    await sock.send(extract_call(1) + extract_call(2))
    sock.shutdown(socket.SHUT_WR)
    received = b""
    with trio.fail_after(10):
        while chunk := await sock.recv(65536):
            received += chunk
    sock.close()
    replies = [json.loads(line) for line in received.splitlines()]
    assert sorted(reply["id"] for reply in replies) == [1, 2]
    assert all("result" in reply for reply in replies), replies


async def test_one_peers_calls_over_its_share_are_refused_with_retry_after(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    daemon = slow_daemon(short_tmp, fake, max_inflight_per_uid=3)
    await nursery.start(daemon.run)
    peers = [await NdjsonPeer.connect(daemon.config.socket_path) for _ in range(2)]
    await peers[0].send_raw(extract_call(1) + extract_call(2))
    await peers[1].send_raw(extract_call(3) + extract_call(4) + extract_call(5))
    replies = []
    with trio.fail_after(20):
        replies += [await peers[0].receive() for _ in range(2)]
        replies += [await peers[1].receive() for _ in range(3)]
    refused = [r for r in replies if "error" in r]
    assert len(refused) == 2 and len(replies) - len(refused) == 3
    for reply in refused:
        assert reply["error"]["code"] == -32003
        assert reply["error"]["data"]["limit"] == "max_inflight_per_uid"
        assert reply["error"]["data"]["retry_after"] > 0
    # Once the share is free again, the peer is served.
    assert "result" in await peers[1].call(
        "memory.extract_from_messages", {**ALICE, "messages": [{"role": "user", "content": "hi"}]}
    )


async def test_a_hang_up_is_seen_while_reading_is_paused_at_max_inflight(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    """A client that queued more than max_inflight and left: the daemon, no longer reading that
    socket, still notices and drops the lot (the unread calls never run)."""
    daemon = slow_daemon(short_tmp, fake, max_inflight_per_connection=4)
    await nursery.start(daemon.run)
    counts = await hang_up_with_calls_sent(daemon, calls=20, hang_up_at=5)
    assert counts["calls_cancelled_by_hangup"] == 4
    await trio.sleep(SLOW)
    assert len(fake.seen) <= 2  # the two the LLM had before the hang-up; the unread 16 never ran
