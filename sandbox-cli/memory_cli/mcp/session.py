"""The MCP protocol of one bridge process, without I/O: a message in, the reply (if any) out.

Two eras of the protocol are served (see the specification's "Versioning" page):

- 2026-07-28, stateless: no handshake; every request names its revision in
  ``params._meta["io.modelcontextprotocol/protocolVersion"]``, results carry ``resultType``.
- 2025-06-18 and 2025-11-25: an ``initialize`` handshake picks the revision for the process.

The first request decides the era for the life of the process, as the specification's
dual-era servers do: ``initialize`` opens a handshake session (and is refused later, on a
stateless one, with the versions served), an enveloped request opens a stateless one (and is
refused on a handshake session).  Tool execution is injected (``call_tool``), so this module
can be driven by tests line by line.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Dict, List, Optional, Tuple

from memory_cli.mcp import tools as tool_table

log = logging.getLogger("memory.mcp")

Json = Dict[str, Any]

MODERN_VERSIONS: Tuple[str, ...] = ("2026-07-28",)
HANDSHAKE_VERSIONS: Tuple[str, ...] = ("2025-11-25", "2025-06-18")  # newest first
SUPPORTED_VERSIONS: Tuple[str, ...] = MODERN_VERSIONS + HANDSHAKE_VERSIONS

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_PROTOCOL_VERSION = -32022

#: The tool list never changes within a release: clients may cache it this long.
TOOLS_TTL_MS = 3_600_000

INSTRUCTIONS = (
    "Long-term memory of the user you are helping, shared with their other assistants. Before replying "
    "to a message that may depend on what you know about the user, call 'context' with it. When the user "
    "tells you a lasting fact, preference or plan, call 'remember' with one sentence per fact. Use "
    "'recall' to look up something specific and 'forget' when asked to forget."
)


class ProtocolError(Exception):
    """Answered as a JSON-RPC error response."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


#: (tool name, arguments) -> (structuredContent, text); raises tools.ToolFailed for isError.
CallTool = Callable[[str, Json], Tuple[Json, str]]


class Session:
    """The protocol state of one stdio connection (one process)."""

    def __init__(self, call_tool: CallTool, server_version: str) -> None:
        self._call_tool = call_tool
        self.server_info = {"name": "memoryd", "title": "memoryd memory", "version": server_version}
        #: None until the first request; then "modern" or "handshake".
        self.era: Optional[str] = None
        #: The handshake revision agreed by ``initialize``.
        self.version: Optional[str] = None
        self.initialized = False

    # -- framing ----------------------------------------------------------------------------

    def receive_line(self, line: bytes) -> Optional[Json]:
        """One line from the client; the reply to write back, or None (a notification)."""
        try:
            message = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return _error(None, PARSE_ERROR, f"Parse error: not a JSON message ({exc})")
        return self.receive(message)

    def receive(self, message: Any) -> Optional[Json]:
        if isinstance(message, list):
            # JSON-RPC batches are not part of MCP since 2025-06-18.
            return _error(
                None, INVALID_REQUEST, "Invalid Request: batches are not supported; send one message per line"
            )
        if not isinstance(message, dict):
            return _error(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
        request_id = message.get("id")
        has_id = "id" in message and (isinstance(request_id, str) or _is_int(request_id))
        method = message.get("method")
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if "method" not in message and ("result" in message or "error" in message):
                return None  # a response to a request we never send: nothing to answer
            return _error(
                request_id if has_id else None,
                INVALID_REQUEST,
                'Invalid Request: needs "jsonrpc": "2.0" and a string "method"',
            )
        params = message.get("params", {})
        if not isinstance(params, dict):
            return _error(request_id if has_id else None, INVALID_PARAMS, "Invalid params: params must be an object")
        if "id" not in message:
            self._notification(method, params)
            return None
        if not has_id:
            return _error(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
        try:
            return {"jsonrpc": "2.0", "id": request_id, "result": self._request(method, params)}
        except ProtocolError as exc:
            return _error(request_id, exc.code, exc.message, exc.data)
        except Exception:  # a bug here must cost one request, not the bridge
            log.exception("memory mcp: unexpected failure answering %s", method)
            return _error(request_id, INTERNAL_ERROR, "Internal error (logged on the bridge's stderr)")

    # -- eras -------------------------------------------------------------------------------

    def _notification(self, method: str, params: Json) -> None:
        if method == "notifications/initialized" and self.era == "handshake":
            self.initialized = True
        # notifications/cancelled: requests are answered one at a time, so by the time it is
        # read the request it names has been answered; others have nothing to act on.

    def _request(self, method: str, params: Json) -> Json:
        meta = params.get("_meta")
        modern = isinstance(meta, dict) and VERSION_KEY in meta
        if method == "initialize":
            if self.era == "modern":
                raise ProtocolError(
                    UNSUPPORTED_PROTOCOL_VERSION,
                    f"This server is serving protocol {MODERN_VERSIONS[0]} (stateless) to this process; "
                    "initialize is not accepted after a stateless request",
                    {"supported": list(SUPPORTED_VERSIONS), "requested": params.get("protocolVersion")},
                )
            return self._initialize(params)
        if self.era == "handshake":
            if modern:
                raise ProtocolError(
                    INVALID_REQUEST,
                    f"This process was opened with initialize (protocol {self.version}); "
                    "requests carrying the 2026-07-28 _meta envelope are not accepted on it",
                )
            return self._handshake_request(method, params)
        if method == "ping" and self.era is None and not modern:
            # The handshake revisions allow a ping before initialize.
            return {}
        if not modern:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: _meta.{VERSION_KEY} is required (protocol {MODERN_VERSIONS[0]}), "
                f"or open the session with initialize (protocols {', '.join(HANDSHAKE_VERSIONS)})",
                {"field": f"_meta.{VERSION_KEY}"},
            )
        return self._modern_request(method, params, meta)

    def _initialize(self, params: Json) -> Json:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise ProtocolError(
                INVALID_PARAMS, "Invalid params: protocolVersion (a string) is required", {"field": "protocolVersion"}
            )
        if self.era == "handshake" and self.initialized:
            raise ProtocolError(INVALID_REQUEST, f"Already initialized (protocol {self.version})")
        # The handshake's rule: the same version if supported, else the newest the server
        # speaks; the client disconnects if it cannot speak that one.
        self.version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[0]
        self.era = "handshake"
        log.info("memory mcp: client asked for protocol %s, serving %s", requested, self.version)
        return {
            "protocolVersion": self.version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": self.server_info,
            "instructions": INSTRUCTIONS,
        }

    def _handshake_request(self, method: str, params: Json) -> Json:
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": self._tool_definitions()}
        if method == "tools/call":
            return self._tools_call(params)
        raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _modern_request(self, method: str, params: Json, meta: Json) -> Json:
        requested = meta.get(VERSION_KEY)
        if not isinstance(requested, str):
            # A malformed envelope, not a version to negotiate: -32022 would stop the client
            # from falling back to the handshake.
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: _meta.{VERSION_KEY} must be a string",
                {"field": f"_meta.{VERSION_KEY}"},
            )
        if requested not in MODERN_VERSIONS:
            raise ProtocolError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(SUPPORTED_VERSIONS), "requested": requested},
            )
        if not isinstance(meta.get(CAPABILITIES_KEY), dict):
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: _meta.{CAPABILITIES_KEY} is required",
                {"field": f"_meta.{CAPABILITIES_KEY}"},
            )
        self.era = "modern"
        if method == "server/discover":
            result: Json = {
                "supportedVersions": list(SUPPORTED_VERSIONS),
                "capabilities": {"tools": {}},
                "instructions": INSTRUCTIONS,
                "ttlMs": TOOLS_TTL_MS,
                "cacheScope": "public",
            }
        elif method == "tools/list":
            # The same tools for every user: a shared cache may keep them.
            result = {"tools": self._tool_definitions(), "ttlMs": TOOLS_TTL_MS, "cacheScope": "public"}
        elif method == "tools/call":
            result = self._tools_call(params)
        else:
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")
        result["resultType"] = "complete"
        result["_meta"] = {SERVER_INFO_KEY: self.server_info}
        return result

    # -- tools ------------------------------------------------------------------------------

    @staticmethod
    def _tool_definitions() -> List[Json]:
        return [tool.definition() for tool in tool_table.TOOLS]

    def _tools_call(self, params: Json) -> Json:
        name = params.get("name")
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: name (the tool's name) is required", {"field": "name"})
        arguments = params.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: arguments must be an object", {"field": "arguments"})
        if tool_table.find(name) is None:
            raise ProtocolError(
                INVALID_PARAMS, f"Unknown tool: {name}", {"field": "name", "tools": list(tool_table.BY_NAME)}
            )
        try:
            structured, text = self._call_tool(name, arguments)
        except tool_table.ToolFailed as exc:
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _error(request_id: Any, code: int, message: str, data: Any = None) -> Json:
    error: Json = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
