"""``memory mcp``: the MCP session driven over stdin/stdout, tool calls forwarded to memoryd.

One JSON message per line each way; stdout carries nothing else (logs go to stderr).  Requests
are answered one at a time, in order.  A line longer than ``max_line_bytes`` is skipped to its
end and answered with an error, so one oversized message cannot grow the bridge's memory or
stop it.  The daemon's connection is opened on the first tool call and reopened on the next
call after the daemon went away, so a restarted daemon is picked up without restarting the
bridge.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, BinaryIO, Dict, Optional, Tuple

from memory_cli import __version__
from memory_cli.mcp import tools as tool_table
from memory_cli.mcp.session import INVALID_REQUEST, Session, _error
from memoryd_client import (
    ConnectionLost,
    DaemonUnavailable,
    InvalidIdentity,
    MemoryClient,
    MemoryClientError,
    MemorydRpcError,
    MissingIdentity,
    RequestTimeout,
    resolve_identity,
)

log = logging.getLogger("memory.mcp")

#: Big enough for a 16 KiB memory escaped as JSON many times over; a client sending more is
#: sending something else.
MAX_LINE_BYTES = 1024 * 1024

NO_IDENTITY = (
    "No identity: this server needs MEMORY_CONTEXT_TOKEN (a context token from the host) or "
    "MEMORY_USER_ID in its environment; set it in the MCP client's configuration for this server."
)


class Bridge:
    """Runs tools against memoryd and turns every failure into a message the model can act on."""

    def __init__(self, client: MemoryClient) -> None:
        self.client = client

    def call_tool(self, name: str, arguments: Dict[str, Any]) -> Tuple[Dict[str, Any], str]:
        tool = tool_table.BY_NAME[name]
        arguments = tool.check_arguments(arguments)
        try:
            outcome = tool.run(self.client, arguments)
        except MissingIdentity:
            raise tool_table.ToolFailed(NO_IDENTITY) from None
        except (DaemonUnavailable, RequestTimeout, ConnectionLost) as exc:
            log.warning("memory mcp: %s failed: memoryd unreachable: %s", name, exc)
            raise tool_table.ToolFailed(
                f"The memory service is not available right now ({exc}). Nothing was done; try again in a moment."
            ) from None
        except MemorydRpcError as exc:
            log.info("memory mcp: %s: the daemon refused it (%s)", name, exc.code)
            raise tool_table.ToolFailed(exc.message) from None
        except MemoryClientError as exc:
            raise tool_table.ToolFailed(f"The memory service answered unexpectedly: {exc}") from None
        log.debug("memory mcp: %s done", name)
        return outcome


def read_line(stream: BinaryIO, limit: int) -> Tuple[Optional[bytes], int]:
    """The next line (without its newline) and its length; ``(None, n)`` for a line over
    ``limit`` (read to its end and dropped); ``(b"", -1)`` at end of input."""
    line = stream.readline(limit + 1)
    if not line:
        return b"", -1
    if len(line) <= limit or line.endswith(b"\n"):
        return line.rstrip(b"\r\n"), len(line)
    size = len(line)
    while True:
        chunk = stream.readline(64 * 1024)
        size += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return None, size


def serve(session: Session, stdin: BinaryIO, stdout: BinaryIO, max_line_bytes: int = MAX_LINE_BYTES) -> None:
    """Answer messages from ``stdin`` until it closes."""
    while True:
        line, size = read_line(stdin, max_line_bytes)
        if size < 0:
            return
        if line is None:
            log.warning("memory mcp: dropped a %d-byte message (limit %d)", size, max_line_bytes)
            reply: Optional[Dict[str, Any]] = _error(
                None,
                INVALID_REQUEST,
                f"Invalid Request: message of {size} bytes is over the limit of {max_line_bytes} bytes",
            )
        elif not line.strip():
            continue
        else:
            reply = session.receive_line(line)
        if reply is not None:
            data = json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace")
            stdout.write(data + b"\n")
            stdout.flush()


def run(socket_path: Optional[str], timeout: float, log_level: str = "warning") -> int:
    logging.basicConfig(
        stream=sys.stderr, level=getattr(logging, log_level.upper(), logging.WARNING), format="%(message)s"
    )
    identity = resolve_identity()
    if not identity.user_id and not identity.context_token:
        print(f"memory mcp: {NO_IDENTITY}", file=sys.stderr)
        return 2
    try:
        identity.params()
    except InvalidIdentity as exc:
        # Every call would fail the same way: better a server the client reports as failed.
        print(f"memory mcp: {exc}", file=sys.stderr)
        return 2
    client = MemoryClient(socket_path=socket_path, timeout=timeout)
    log.info("memory mcp: serving memoryd at %s over stdio", client.socket_path)
    session = Session(Bridge(client).call_tool, __version__)
    try:
        serve(session, sys.stdin.buffer, sys.stdout.buffer)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        pass  # the client went away
    finally:
        client.close()
    return 0
