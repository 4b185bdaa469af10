"""A bare trio echo server on memoryd's framing: the floor a trio server on a Unix socket can reach.

    python bench/echo_server.py SOCKET_PATH

Like memoryd it decides the framing from a connection's first byte (``{``, ``[`` or whitespace:
NDJSON, else a 4-byte big-endian length prefix) and answers every complete frame in the same
framing, here with the request's own bytes: no JSON parsing, no dispatch, no handler, no worker
thread.  bench/run_all.py compares memoryd's system.health round trip with this one.
"""

from __future__ import annotations

import os
import socket
import struct
import sys

import trio

_HEADER = struct.Struct(">I")
_LINE_STARTS = b"{[ \t\r\n"


async def echo(stream: trio.SocketStream) -> None:
    buffer = bytearray()
    lines: bool | None = None
    async with stream:
        while True:
            try:
                chunk = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                return
            if not chunk:
                return
            buffer += chunk
            if lines is None:
                lines = buffer[0] in _LINE_STARTS
            replies = bytearray()
            if lines:
                end = buffer.rfind(b"\n")
                if end >= 0:
                    # Every complete line goes back as it came, newline included.
                    replies += buffer[: end + 1]
                    del buffer[: end + 1]
            else:
                while len(buffer) >= 4:
                    (length,) = _HEADER.unpack_from(buffer)
                    if len(buffer) < 4 + length:
                        break
                    replies += buffer[: 4 + length]
                    del buffer[: 4 + length]
            if replies:
                try:
                    await stream.send_all(bytes(replies))
                except trio.BrokenResourceError:
                    return


async def main(path: str) -> None:
    if os.path.exists(path):
        os.unlink(path)
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.bind(path)
    sock.listen(128)
    listener = trio.SocketListener(sock)
    await trio.serve_listeners(echo, [listener])


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
