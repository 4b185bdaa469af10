"""RpcServer on a real socket: per-connection backpressure, and a graceful shutdown in which nothing
read goes unanswered."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest
import trio
from trio.testing import MockClock

from memoryd.config import LimitsConfig
from memoryd.rpc.dispatch import CallContext, MethodTable
from memoryd.server.listener import RpcServer
from tests.wire import NdjsonPeer

# The tests run on trio's virtual clock (autojump_clock): grace periods and lingers pass at once,
# exactly as counted; the server and its clients share the test's trio loop, no threads.


class Seconds(msgspec.Struct):
    seconds: float = 0.0


class Running:
    now = 0
    most = 0


def sleepy_table(running: Running) -> MethodTable:
    table = MethodTable()

    async def sleep(params: Seconds, ctx: CallContext) -> str:
        running.now += 1
        running.most = max(running.most, running.now)
        try:
            await trio.sleep(params.seconds)
        finally:
            running.now -= 1
        return "slept"

    table.register("sleep", Seconds, sleep)
    return table


class Served:
    def __init__(self, server: RpcServer, path: Path, running: Running) -> None:
        self.server = server
        self.path = path
        self.running = running

    async def connect(self) -> NdjsonPeer:
        return await NdjsonPeer.connect(self.path)


@pytest.fixture
async def served(short_tmp: Path, nursery: trio.Nursery) -> AsyncIterator[Served]:
    path = short_tmp / "s.sock"
    listen_socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listen_socket.bind(str(path))
    listen_socket.listen()
    running = Running()
    limits = msgspec.convert({"shutdown_grace": 0.5, "max_inflight_per_connection": 3}, LimitsConfig)
    server = RpcServer(sleepy_table(running), limits)
    # Long enough that a request sent right after shutdown begins lands inside it on a busy machine.
    server.connection_limits = replace(server.connection_limits, shutdown_linger=3.0)
    await nursery.start(server.serve, listen_socket)
    yield Served(server, path, running)
    server.shutdown()
    listen_socket.close()


async def test_pipelined_calls_past_max_inflight_wait_their_turn_and_all_get_answers(
    served: Served, autojump_clock: MockClock
) -> None:
    with trio.fail_after(20):
        peer = await served.connect()
        for id in range(12):
            await peer.send({"jsonrpc": "2.0", "method": "sleep", "params": {"seconds": 0.02}, "id": id})
        replies = [await peer.receive() for _ in range(12)]
    assert sorted(reply["id"] for reply in replies) == list(range(12))
    assert all(reply["result"] == "slept" for reply in replies)
    assert served.running.most == 3


async def test_a_request_sent_as_shutdown_begins_is_answered_shutting_down(
    served: Served, autojump_clock: MockClock
) -> None:
    with trio.fail_after(20):
        peer = await served.connect()
        assert (await peer.call("sleep", {}))["result"] == "slept"
        served.server.shutdown()
        reply = await peer.call("sleep", {}, id="late")
        assert reply["id"] == "late" and reply["error"]["code"] == -32006
        await peer.aclose()
        await served.server.stopped.wait()


async def test_a_call_running_at_shutdown_finishes_within_the_grace_period(
    served: Served, autojump_clock: MockClock
) -> None:
    with trio.fail_after(20):
        peer = await served.connect()
        await peer.send({"jsonrpc": "2.0", "method": "sleep", "params": {"seconds": 0.1}, "id": 1})
        await trio.sleep(0.05)
        served.server.shutdown()
        assert (await peer.receive())["result"] == "slept"
        await peer.aclose()
        await served.server.stopped.wait()


async def test_a_call_still_running_when_the_grace_period_ends_is_answered_shutting_down(
    served: Served, autojump_clock: MockClock
) -> None:
    with trio.fail_after(20):
        peer = await served.connect()
        await peer.send({"jsonrpc": "2.0", "method": "sleep", "params": {"seconds": 60}, "id": "long"})
        while served.server.stats()["requests_in_flight"] == 0:
            await trio.sleep(0.01)
        served.server.shutdown()
        reply = await peer.receive()
        assert reply["id"] == "long" and reply["error"]["code"] == -32006
        await served.server.stopped.wait()
        assert await peer.receive_raw() is None  # and the connection is closed


async def test_an_idle_connection_is_closed_once_quiet_and_the_server_stops(
    served: Served, autojump_clock: MockClock
) -> None:
    server = served.server
    server.connection_limits = replace(server.connection_limits, shutdown_linger=0.1)
    peer = await served.connect()
    assert "result" in await peer.call("sleep", {})
    server.shutdown()
    # Quiet for the linger, then closed: long before the grace period (0.5 s) runs out.
    with trio.fail_after(0.3):
        assert await peer.receive_raw() is None
        await server.stopped.wait()
    assert server.stats()["connections_open"] == 0


async def test_stats_json_is_stats_encoded_as_connections_come_go_and_calls_run(
    served: Served, autojump_clock: MockClock
) -> None:
    server = served.server

    def same() -> dict[str, object]:
        stats = server.stats()
        assert server.stats_json() == msgspec.json.encode(stats)
        return stats

    with trio.fail_after(20):
        assert same()["connections_total"] == 0 and same()["connections_by_uid"] == {}
        first = await served.connect()
        assert "result" in await first.call("sleep", {})
        second = await served.connect()
        await second.send({"jsonrpc": "2.0", "method": "sleep", "params": {"seconds": 60}, "id": 1})
        while server.stats()["requests_in_flight"] == 0:
            await trio.sleep(0.01)
        stats = same()
        assert stats["connections_open"] == 2 and stats["requests_in_flight"] == 1
        assert stats["connections_by_uid"] == {str(os.getuid()): 2}
        await first.aclose()
        while server.stats()["connections_open"] != 1:
            await trio.sleep(0.01)
        assert same()["requests_total"] == 2
