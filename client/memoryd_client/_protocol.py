"""JSON-RPC 2.0 over NDJSON, without I/O: encode a request, split replies into lines, read a reply.

Both drivers (the blocking ``MemoryClient`` and the trio ``AsyncMemoryClient``) only move bytes
and call into this module, so the wire rules live in one place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Optional

from .errors import InvalidParams, MemorydRpcError, PayloadTooLarge, ProtocolError, error_from_object

#: Replies larger than this are refused rather than buffered without bound (a list of 1000
#: long memories is a few MiB).
DEFAULT_MAX_REPLY_BYTES = 64 * 1024 * 1024


def encode_request(request_id: int, method: str, params: Dict[str, Any]) -> bytes:
    """One request as an NDJSON line.  json escapes newlines inside strings, so the line is whole."""
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    # allow_nan=False: NaN/Infinity are not JSON and the daemon would reject the whole line.
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        raise _not_unicode(params) from None


def _not_unicode(params: Dict[str, Any]) -> InvalidParams:
    """The daemon's own refusal of text with a lone surrogate (what Python makes of argv or
    environment bytes that are not UTF-8), raised before sending: such text has no UTF-8 form."""
    field = "params"
    for name, value in params.items():
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            field = name
            break
    reason = "must be valid Unicode (it has a lone surrogate)"
    return InvalidParams(f"Invalid params: {field}: {reason}", {"field": field, "reason": reason})


class LineReader:
    """Splits a byte stream into non-blank lines; remembers how far it searched (O(n) overall)."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> None:
        self._buffer = bytearray()
        self._scanned = 0
        self._max_line_bytes = max_line_bytes

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next_line(self) -> Optional[bytes]:
        """The next complete non-blank line without its terminator, or None if more bytes are needed."""
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end < 0:
                self._scanned = len(self._buffer)
                if self._scanned > self._max_line_bytes:
                    raise ProtocolError(f"reply exceeds {self._max_line_bytes} bytes")
                return None
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            self._scanned = 0
            if line.strip():
                return line


@dataclass(frozen=True)
class Response:
    id: Any
    result: Any
    error: Optional[MemorydRpcError]


def parse_response(line: bytes) -> Response:
    """Decode one reply line; raises ProtocolError if it is not a JSON-RPC 2.0 response."""
    try:
        message = json.loads(line)
    except ValueError as exc:  # includes UnicodeDecodeError
        raise ProtocolError(f"reply is not JSON: {line[:200]!r}") from exc
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "id" not in message:
        raise ProtocolError(f"reply is not a JSON-RPC 2.0 response: {line[:200]!r}")
    if "error" in message:
        return Response(message["id"], None, error_from_object(message["error"]))
    if "result" not in message:
        raise ProtocolError(f"reply has neither result nor error: {line[:200]!r}")
    return Response(message["id"], message["result"], None)


def outcome(response: Response, request_id: int, sent_bytes: Optional[int] = None) -> Any:
    """The result of our call, or raise its error.

    A null-id error answers the connection rather than a call (the daemon could not read our
    line, or it was too large) and is raised as is; any other id is a protocol error.  The
    drivers drop the connection whenever ``response.id != request_id``.  ``sent_bytes`` (the
    request's size) goes into a PayloadTooLarge's message.
    """
    if response.error is not None and response.id is None:
        if isinstance(response.error, PayloadTooLarge) and sent_bytes is not None:
            raise response.error.sized(sent_bytes)
        raise response.error
    if response.id != request_id or isinstance(response.id, bool):
        raise ProtocolError(f"reply id {response.id!r} does not match request id {request_id}")
    if response.error is not None:
        raise response.error
    return response.result
