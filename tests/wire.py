"""Raw protocol peers for tests: they speak bytes on the socket, exactly as a foreign client would."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Self

import trio


class _Peer:
    """What both framings share: the stream, its read buffer, a call and its reply."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    @classmethod
    async def connect(cls, path: Path | str) -> Self:
        return cls(await trio.open_unix_socket(str(path)))

    async def send(self, message: Any) -> None:
        raise NotImplementedError

    async def receive(self) -> Any:
        raise NotImplementedError

    async def _fill(self, count: int) -> bool:
        """Read until the buffer holds ``count`` bytes or has a newline (count 0); False at EOF."""
        while (len(self.buffer) < count) if count else (b"\n" not in self.buffer):
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                return False
            self.buffer += chunk
        return True

    async def call(self, method: str, params: dict[str, Any] | None = None, id: Any = 1) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.receive()

    async def aclose(self) -> None:
        await self.stream.aclose()


class NdjsonPeer(_Peer):
    """Newline-delimited JSON over a trio Unix stream."""

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send(self, message: Any) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def receive_raw(self) -> bytes | None:
        """One reply line, or None at EOF."""
        if not await self._fill(0):
            return None
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    async def receive(self) -> Any:
        line = await self.receive_raw()
        assert line is not None, "connection closed before a reply"
        return json.loads(line)


class PrefixPeer(_Peer):
    """4-byte big-endian length prefix + JSON: the framing of ash's sandbox RPC client."""

    async def send_raw(self, payload: bytes) -> None:
        await self.stream.send_all(struct.pack(">I", len(payload)) + payload)

    async def send(self, message: Any) -> None:
        await self.send_raw(json.dumps(message).encode())

    async def _read_exactly(self, count: int) -> bytes | None:
        if not await self._fill(count):
            return None
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    async def receive(self) -> Any:
        header = await self._read_exactly(4)
        assert header is not None, "connection closed before a reply"
        (length,) = struct.unpack(">I", header)
        payload = await self._read_exactly(length)
        assert payload is not None
        return json.loads(payload)


async def call_ok(peer: NdjsonPeer, method: str, params: dict[str, Any]) -> Any:
    """The result of one call, failing the test on an error reply."""
    reply = await peer.call(method, params)
    assert "result" in reply, reply
    return reply["result"]


async def call_error(peer: NdjsonPeer, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The error of one call, failing the test on a result."""
    reply = await peer.call(method, params)
    assert "error" in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


async def drained(peer: NdjsonPeer, queue: str = "embed", timeout: float = 20) -> dict[str, Any]:
    """Poll system.health until the ``queue`` backlog ("embed", "supersede") is empty; that health."""
    with trio.fail_after(timeout):
        while True:
            health = await call_ok(peer, "system.health", {})
            if not health["backlog"].get(queue, 0):
                return health
            await trio.sleep(0.02)


def sync_call(path: Path | str, method: str, params: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
    """One NDJSON call with blocking sockets (for tests that drive a daemon subprocess)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        message = {"jsonrpc": "2.0", "method": method, "id": 1, "params": params or {}}
        sock.sendall(json.dumps(message).encode() + b"\n")
        return json.loads(read_line(sock))


#: memory.list's largest page.
LIST_PAGE = 1000


def _next_list_params(user_id: str, page: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """memory.list's params for the page after ``page`` (None: the first one); None once
    ``page`` was the last.  Keyset paging (before_id): a page never shifts under the next."""
    if page is None:
        return {"user_id": user_id, "limit": LIST_PAGE}
    if len(page) < LIST_PAGE:
        return None
    return {"user_id": user_id, "limit": LIST_PAGE, "before_id": page[-1]["id"]}


async def listed_ids(peer: NdjsonPeer, user_id: str) -> set[str]:
    """The ids of every memory.list page of ``user_id``'s memories."""
    ids: set[str] = set()
    page = None
    while (params := _next_list_params(user_id, page)) is not None:
        page = await call_ok(peer, "memory.list", params)
        ids |= {memory["id"] for memory in page}
    return ids


def sync_listed_ids(path: Path | str, user_id: str) -> set[str]:
    """``listed_ids`` with blocking sockets (for tests that drive a daemon subprocess)."""
    ids: set[str] = set()
    page = None
    while (params := _next_list_params(user_id, page)) is not None:
        page = sync_call(path, "memory.list", params)["result"]
        ids |= {memory["id"] for memory in page}
    return ids


def read_line(sock: socket.socket) -> bytes:
    """Blocking: bytes up to and with the first newline, or what came before EOF."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


# Run as another uid: connect ``count`` times, then hand the connected sockets back over the
# inherited socketpair.  SO_PEERCRED is fixed at connect(), so the daemon sees ``uid`` as the peer
# of every one of them, though this (root) test process holds and drives them.
_CONNECT_AS = """
import os, socket, sys
channel_fd, uid, path, count = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
os.setgroups([])
os.setgid(uid)
os.setuid(uid)
channel = socket.socket(fileno=channel_fd)
held = []
for _ in range(count):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    held.append(sock)
for start in range(0, count, 100):
    socket.send_fds(channel, [b"x"], [sock.fileno() for sock in held[start:start + 100]])
"""


def can_switch_uid() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def connect_as_uid(path: Path | str, uid: int, count: int) -> list[socket.socket]:
    """``count`` blocking sockets connected to ``path`` by a process running as ``uid`` (needs root;
    the socket and its directory must let ``uid`` in)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        subprocess.run(
            [sys.executable, "-c", _CONNECT_AS, str(theirs.fileno()), str(uid), str(path), str(count)],
            pass_fds=[theirs.fileno()],
            check=True,
            timeout=60,
        )
        received: list[socket.socket] = []
        while len(received) < count:
            _, fds, _, _ = socket.recv_fds(ours, 1, 100)
            received += [socket.socket(fileno=fd) for fd in fds]
    return received
