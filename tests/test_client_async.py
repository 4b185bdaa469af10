"""AsyncMemoryClient against a real NDJSON JSON-RPC server run as a trio task on a Unix socket."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from memoryd_client import (
    ConnectionLost,
    DaemonUnavailable,
    InvalidParams,
    MemorydRpcError,
    MissingIdentity,
    PayloadTooLarge,
    RequestTimeout,
)


class FakeDaemon:
    """Echoes method and params; ``test.*`` methods fail, stay silent, or hang up."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.connections = 0

    async def run(
        self, path: str, *, task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until the returned scope is cancelled; then unlink the socket like a daemon exiting."""
        with trio.CancelScope() as scope:
            sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
            await sock.bind(path)
            sock.listen(16)
            try:
                async with trio.SocketListener(sock) as listener, trio.open_nursery() as nursery:
                    task_status.started(scope)
                    while True:
                        stream = await listener.accept()
                        self.connections += 1
                        nursery.start_soon(self._serve, stream)
            finally:
                os.unlink(path)

    async def _serve(self, stream: trio.SocketStream) -> None:
        async with stream:
            try:
                await self._answer_lines(stream)
            except trio.BrokenResourceError:
                return  # the client went away mid-conversation

    async def _answer_lines(self, stream: trio.SocketStream) -> None:
        buffer = b""
        async for data in stream:  # until the client closes its end
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                request = json.loads(line)
                self.requests.append(request)
                method, params, rid = request["method"], request["params"], request["id"]
                if method == "test.silent":
                    continue
                if method == "test.hangup":
                    return
                if method == "test.fail":
                    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "error": params["error"]}
                else:
                    reply = {"jsonrpc": "2.0", "id": rid, "result": {"method": method, "params": params}}
                await stream.send_all(json.dumps(reply).encode() + b"\n")


@pytest.fixture
def sock_path() -> Iterator[str]:
    # tmp_path can exceed the 108-byte AF_UNIX limit; /tmp keeps paths short.
    directory = tempfile.mkdtemp(prefix="mdc-", dir="/tmp")
    yield str(Path(directory) / "d.sock")
    shutil.rmtree(directory, ignore_errors=True)


pytestmark = pytest.mark.usefixtures("clean_client_env")


async def test_async_client_sends_identity_and_typed_params(sock_path: str, nursery: trio.Nursery) -> None:
    from memoryd_client import AsyncMemoryClient

    daemon = FakeDaemon()
    await nursery.start(daemon.run, sock_path)
    async with AsyncMemoryClient(sock_path, user_id="alice", chat_id="team", context_token="a.b.c") as client:
        ident = {"user_id": "alice", "chat_id": "team", "context_token": "a.b.c"}
        assert await client.add("tea", subjects=["alice"]) == {
            "method": "memory.add",
            "params": {**ident, "content": "tea", "subjects": ["alice"], "shared": False},
        }
        assert (await client.search("tea"))["params"] == {**ident, "query": "tea", "limit": 10}
        assert (await client.list())["params"] == {**ident, "limit": 20, "offset": 0, "include_expired": False}
        assert (await client.delete("01J00000"))["params"] == {**ident, "memory_id": "01J00000"}
        assert (await client.health())["method"] == "system.health"
        assert (await client.call("custom", x=[1]))["params"] == {**ident, "x": [1]}
    assert daemon.connections == 1
    assert [r["id"] for r in daemon.requests] == [1, 2, 3, 4, 5, 6]


async def test_async_client_sends_memory_types(sock_path: str, nursery: trio.Nursery) -> None:
    from memoryd_client import AsyncMemoryClient

    daemon = FakeDaemon()
    await nursery.start(daemon.run, sock_path)
    async with AsyncMemoryClient(sock_path, user_id="alice") as client:
        assert (await client.search("tea", types=["episode"]))["params"]["types"] == ["episode"]
        listed = await client.list(types=("preference", "identity"))
        assert listed["params"]["types"] == ["preference", "identity"]
        assert "types" not in (await client.search("tea"))["params"]


async def test_async_client_identity_from_environment(
    sock_path: str, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd_client import AsyncMemoryClient

    await nursery.start(FakeDaemon().run, sock_path)
    monkeypatch.setenv("MEMORYD_SOCKET", sock_path)
    monkeypatch.setenv("MEMORY_USER_ID", "env-user")
    async with AsyncMemoryClient() as client:
        assert (await client.health())["params"] == {"user_id": "env-user"}


async def test_async_client_maps_error_codes(sock_path: str, nursery: trio.Nursery) -> None:
    from memoryd_client import AsyncMemoryClient

    await nursery.start(FakeDaemon().run, sock_path)
    async with AsyncMemoryClient(sock_path, user_id="u") as client:
        data = {"field": "query", "reason": "is required"}
        with pytest.raises(InvalidParams) as caught:
            await client.call("test.fail", error={"code": -32602, "message": "bad query", "data": data})
        assert (caught.value.code, caught.value.message, caught.value.data) == (-32602, "bad query", data)
        with pytest.raises(MemorydRpcError) as unknown:
            await client.call("test.fail", error={"code": -1, "message": "odd"})
        assert type(unknown.value) is MemorydRpcError and unknown.value.code == -1


async def test_async_client_without_user_id_fails_at_call_time(sock_path: str) -> None:
    from memoryd_client import AsyncMemoryClient

    client = AsyncMemoryClient(sock_path)
    with pytest.raises(MissingIdentity):
        await client.list()


async def test_async_client_missing_socket_raises_daemon_unavailable(sock_path: str) -> None:
    from memoryd_client import AsyncMemoryClient

    with pytest.raises(DaemonUnavailable) as caught:
        await AsyncMemoryClient(sock_path, user_id="u").health()
    assert sock_path in str(caught.value) and "memoryd serve" in str(caught.value)


@pytest.mark.parametrize(
    "method, error, requests, connections",
    [
        # A timeout is not retried (the call may have run), and its connection is never reused.
        ("test.silent", RequestTimeout, ["test.silent", "system.health"], 2),
        # A cut connection is retried once on a fresh one; cut again, the call fails.
        ("test.hangup", ConnectionLost, ["test.hangup", "test.hangup", "system.health"], 3),
    ],
    ids=["timed-out", "cut-twice"],
)
async def test_async_client_failed_call_raises_and_the_next_call_works(
    method: str,
    error: type[Exception],
    requests: list[str],
    connections: int,
    sock_path: str,
    nursery: trio.Nursery,
    autojump_clock: trio.abc.Clock,
) -> None:
    from memoryd_client import AsyncMemoryClient

    daemon = FakeDaemon()
    await nursery.start(daemon.run, sock_path)
    async with AsyncMemoryClient(sock_path, user_id="u", timeout=30) as client:
        with pytest.raises(error):
            await client.call(method)
        assert (await client.health())["method"] == "system.health"
    assert [r["method"] for r in daemon.requests] == requests
    assert daemon.connections == connections


async def test_async_client_reconnects_after_daemon_restart(sock_path: str, nursery: trio.Nursery) -> None:
    from memoryd_client import AsyncMemoryClient

    first = FakeDaemon()
    scope = await nursery.start(first.run, sock_path)
    async with AsyncMemoryClient(sock_path, user_id="u", timeout=5) as client:
        assert (await client.add("before"))["params"]["content"] == "before"
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        second = FakeDaemon()
        await nursery.start(second.run, sock_path)
        assert (await client.add("after"))["params"]["content"] == "after"
        assert [r["params"]["content"] for r in second.requests] == ["after"]


async def test_async_client_serializes_concurrent_calls(sock_path: str, nursery: trio.Nursery) -> None:
    from memoryd_client import AsyncMemoryClient

    await nursery.start(FakeDaemon().run, sock_path)
    results: dict[int, str] = {}
    async with AsyncMemoryClient(sock_path, user_id="u", timeout=5) as client:

        async def one(n: int) -> None:
            results[n] = (await client.search(f"q{n}"))["params"]["query"]

        async with trio.open_nursery() as inner:
            for n in range(20):
                inner.start_soon(one, n)
    assert results == {n: f"q{n}" for n in range(20)}


async def test_async_client_oversized_request_gets_payload_too_large(sock_path: str, nursery: trio.Nursery) -> None:
    from memoryd_client import AsyncMemoryClient

    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(sock_path)
    sock.listen(4)

    async def refuse_big_messages() -> None:
        # Like the daemon's framing cap: answer with a null-id error, then hang up mid-request.
        async with trio.SocketListener(sock) as listener:
            stream = await listener.accept()
            async with stream:
                await stream.receive_some(65536)
                await stream.send_all(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32004,"message":"too large"}}\n')

    nursery.start_soon(refuse_big_messages)
    with pytest.raises(PayloadTooLarge):
        await AsyncMemoryClient(sock_path, user_id="u", timeout=5).add("x" * 4_000_000)
