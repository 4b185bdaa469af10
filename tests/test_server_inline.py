"""Calls answered in the read loop (server/connection.py) on a real socket: they never wait behind a
slow call on the same connection, replies larger than the socket buffer arrive whole and
unmixed, and the read deadlines (idle) still hold."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from memoryd.config import LimitsConfig
from memoryd.rpc.dispatch import CallContext, MethodTable
from memoryd.server import connection
from memoryd.server.listener import RpcServer
from tests.wire import NdjsonPeer, PrefixPeer

#: Bigger than a Unix socket's send buffer, so a reply of it cannot be written at once.
BIG = 600 * 1024


class Size(msgspec.Struct):
    size: int = 10
    seconds: float = 0.0


def table() -> MethodTable:
    methods = MethodTable()

    def blob_now(params: Size, ctx: CallContext) -> Any:
        return "x" * params.size

    async def blob(params: Size, ctx: CallContext) -> Any:
        raise AssertionError("blob always answers now")

    async def sleep(params: Size, ctx: CallContext) -> Any:
        await trio.sleep(params.seconds)
        return "y" * params.size

    methods.register("blob", Size, blob, now=blob_now)
    methods.register("sleep", Size, sleep)
    return methods


async def start_server(path: Path, methods: MethodTable, nursery: trio.Nursery) -> tuple[RpcServer, socket.socket]:
    """Serving ``methods`` on ``path``, with idle_timeout 2 s."""
    listen_socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listen_socket.bind(str(path))
    listen_socket.listen()
    limits = msgspec.convert({"idle_timeout": 2.0, "max_reply_bytes": 8 * BIG}, LimitsConfig)
    server = RpcServer(methods, limits)
    await nursery.start(server.serve, listen_socket)
    return server, listen_socket


@pytest.fixture
async def server(short_tmp: Path, nursery: trio.Nursery) -> AsyncIterator[RpcServer]:
    """Serving ``table()`` on ``short_tmp / "s.sock"``, with idle_timeout 2 s."""
    server, listen_socket = await start_server(short_tmp / "s.sock", table(), nursery)
    yield server
    server.shutdown()
    listen_socket.close()


@pytest.fixture
def path(server: RpcServer, short_tmp: Path) -> Path:
    """The socket ``server`` listens on."""
    return short_tmp / "s.sock"


def call(method: str, id: Any, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params, "id": id}


async def test_a_call_answered_now_does_not_wait_behind_a_slow_call_on_its_connection(path: Path) -> None:
    with trio.fail_after(20):
        peer = await NdjsonPeer.connect(path)
        await peer.send(call("sleep", "slow", seconds=30.0))
        for id in range(5):
            await peer.send(call("blob", id))
        # All five are answered while the slow call still sleeps: nothing queued behind it.
        assert sorted([(await peer.receive())["id"] for _ in range(5)]) == list(range(5))
        await peer.aclose()


async def test_pipelined_slow_and_inline_calls_all_get_their_own_whole_replies(server: RpcServer, path: Path) -> None:
    with trio.fail_after(30):
        peer = await PrefixPeer.connect(path)
        expected: dict[Any, int] = {}
        for id in range(12):
            size = BIG if id % 3 == 0 else 1000 + id
            if id % 2:
                await peer.send(call("sleep", id, size=size, seconds=0.01 * id))
            else:
                await peer.send(call("blob", id, size=size))
            expected[id] = size
        # Read slowly, so replies bigger than the socket buffer go out in pieces, interleaved
        # in time with the others; each must still be one whole, unmixed frame.
        got: dict[Any, int] = {}
        for _ in range(12):
            await trio.sleep(0.02)
            reply = await peer.receive()
            got[reply["id"]] = len(reply["result"])
        assert got == expected
        await peer.aclose()
    with trio.fail_after(10):
        while server.connections:
            await trio.sleep(0.01)
    assert server.budget.used == 0  # every reply's charge was given back


async def test_an_idle_connection_is_still_closed_after_idle_timeout(path: Path, autojump_clock: Any) -> None:
    # On trio's virtual clock: the seconds below pass at once, and exactly as counted.
    peer = await NdjsonPeer.connect(path)  # the server's idle_timeout is 2 s
    with trio.fail_after(20):
        # Idle counts from the last answer, not from when the connection opened: calls 1.2 s
        # apart keep it open past 2 s...
        for id in range(3):
            assert (await peer.call("blob", {"size": 1}, id=id))["result"] == "x"
            await trio.sleep(1.2)
        # ...and once quiet, the server closes it.
        assert await peer.receive_raw() is None


async def test_a_line_client_gets_inline_replies_in_its_framing(path: Path) -> None:
    with trio.fail_after(20):
        peer = await NdjsonPeer.connect(path)
        await peer.send_raw(json.dumps(call("blob", 1, size=BIG)).encode() + b"\n")
        reply = await peer.receive()
        assert reply["id"] == 1 and len(reply["result"]) == BIG
        await peer.aclose()


class Tag(msgspec.Struct):
    tag: str


async def test_a_client_whose_calls_are_all_waiting_does_not_keep_another_waiting(
    short_tmp: Path, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every read of a connection comes after a scheduler pass, even when its bytes are already
    there: a client with many calls queued is served a read's worth at a time, and another
    client's call that arrives meanwhile is answered between two of those reads, not after all
    of them."""
    monkeypatch.setattr(connection, "RECEIVE_CHUNK", 1024)  # ~17 calls per read
    answered: list[str] = []
    other_call = json.dumps(call("tag", "b", tag="b")).encode() + b"\n"
    peers: dict[str, NdjsonPeer] = {}

    def tag_now(params: Tag, ctx: CallContext) -> Any:
        answered.append(params.tag)
        if params.tag == "first":
            # B's call arrives while A's connection is being served, its calls all waiting.
            assert os.write(peers["b"].stream.socket.fileno(), other_call) == len(other_call)
        return params.tag

    async def tag(params: Tag, ctx: CallContext) -> Any:
        raise AssertionError("tag always answers now")

    methods = MethodTable()
    methods.register("tag", Tag, tag, now=tag_now)
    server, listen_socket = await start_server(short_tmp / "f.sock", methods, nursery)
    with trio.fail_after(20):
        for name in ("a", "b"):
            peers[name] = await NdjsonPeer.connect(short_tmp / "f.sock")
            assert (await peers[name].call("tag", {"tag": "hello"}))["result"] == "hello"
        answered.clear()
        queued = [call("tag", 0, tag="first")] + [call("tag", id, tag="a") for id in range(1, 600)]
        burst = b"".join(json.dumps(message).encode() + b"\n" for message in queued)
        # Written whole before the server runs again: every one of A's calls is waiting at once.
        assert os.write(peers["a"].stream.socket.fileno(), burst) == len(burst)
        assert (await peers["b"].receive())["result"] == "b"
        assert sorted([(await peers["a"].receive())["id"] for _ in queued]) == list(range(600))
    assert len(answered) == 601 and answered[0] == "first"
    # A read is ~17 of A's calls; B is answered within the next two reads of A (which of the two
    # runs first after the pass is the scheduler's choice), not after all 35.
    assert answered.index("b") < 3 * 20
    server.shutdown()
    listen_socket.close()
