"""The client's error hierarchy.

The JSON-RPC codes are copied from the daemon's ``memoryd/errors.py``: the client must run where
the daemon package is not installed.

    MemoryClientError
    ├── DaemonUnavailable        no socket, connection refused, or no permission to connect
    ├── ConnectionLost           the connection broke again after one reconnect-and-resend
    ├── RequestTimeout           no reply within the client's timeout (also a builtin TimeoutError)
    ├── ProtocolError            the daemon's reply was not a JSON-RPC 2.0 response to our call
    ├── MissingIdentity          no user id: neither passed, nor in the environment, nor in a token
    └── MemorydRpcError          the daemon answered with an error: .code .message .data
        ├── ParseError           -32700
        ├── InvalidRequest       -32600
        ├── MethodNotFound       -32601
        ├── InvalidParams        -32602  data = {"field": ..., "reason": ...}
        ├── InternalError        -32603
        ├── NotFound             -32001
        ├── Unauthorized         -32002
        ├── Overloaded           -32003  retry later
        ├── PayloadTooLarge      -32004  the daemon closed the connection
        ├── DeadlineExceeded     -32005
        ├── ShuttingDown         -32006  retry after the daemon restarts
        ├── Unavailable          -32007  the database is busy (locked by another process); retry
        └── LlmNotConfigured     -32008  extraction is off: the daemon's [llm] names no provider

An error code this client does not know becomes a plain ``MemorydRpcError``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class MemoryClientError(Exception):
    """Base of every error the memoryd client raises."""


class DaemonUnavailable(MemoryClientError):
    """The daemon's socket is missing, refuses connections, or may not be opened by us."""

    def __init__(self, socket_path: str, origin: str, reason: str) -> None:
        self.socket_path = socket_path
        self.reason = reason
        super().__init__(
            f"memoryd is not reachable at {socket_path} ({origin}): {reason}. "
            "Start it with `memoryd serve` (or `systemctl --user start memoryd`), "
            "or set MEMORYD_SOCKET to the socket it listens on."
        )


class ConnectionLost(MemoryClientError):
    """The connection broke before the reply, and broke again after reconnecting once."""


class RequestTimeout(MemoryClientError, TimeoutError):
    """No reply within the client's timeout; the connection is dropped and reopened on the next call."""


class ProtocolError(MemoryClientError):
    """The reply was not a JSON-RPC 2.0 response to the request we sent."""


class MissingIdentity(MemoryClientError):
    """No user id to send: every memoryd method needs one."""


class MemorydRpcError(MemoryClientError):
    """The daemon answered with a JSON-RPC error object."""

    code: int = -32603

    def __init__(self, message: str, data: Any = None, code: Optional[int] = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        self.data = data
        super().__init__(message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r}, data={self.data!r})"


class ParseError(MemorydRpcError):
    code = -32700


class InvalidRequest(MemorydRpcError):
    code = -32600


class MethodNotFound(MemorydRpcError):
    code = -32601


class InvalidParams(MemorydRpcError):
    code = -32602

    @property
    def field(self) -> Optional[str]:
        """The parameter the daemon rejected, when it said."""
        return self.data.get("field") if isinstance(self.data, dict) else None

    @property
    def reason(self) -> Optional[str]:
        return self.data.get("reason") if isinstance(self.data, dict) else None


class InternalError(MemorydRpcError):
    code = -32603


class NotFound(MemorydRpcError):
    code = -32001


class Unauthorized(MemorydRpcError):
    code = -32002


class Overloaded(MemorydRpcError):
    code = -32003


class PayloadTooLarge(MemorydRpcError):
    code = -32004


class DeadlineExceeded(MemorydRpcError):
    code = -32005


class ShuttingDown(MemorydRpcError):
    code = -32006


class Unavailable(MemorydRpcError):
    code = -32007


class LlmNotConfigured(MemorydRpcError):
    """Extraction is off on this daemon: its [llm] section names no provider."""

    code = -32008


RPC_ERRORS_BY_CODE: Dict[int, Type[MemorydRpcError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        NotFound,
        Unauthorized,
        Overloaded,
        PayloadTooLarge,
        DeadlineExceeded,
        ShuttingDown,
        Unavailable,
        LlmNotConfigured,
    )
}


def error_from_object(error: Any) -> MemorydRpcError:
    """The exception for a JSON-RPC error object ``{"code", "message", "data"?}``."""
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        raise ProtocolError(f"malformed JSON-RPC error object: {error!r:.200}")
    code: int = error["code"]
    message = error.get("message")
    if not isinstance(message, str):
        message = f"error {code}"
    cls = RPC_ERRORS_BY_CODE.get(code)
    if cls is None:
        return MemorydRpcError(message, error.get("data"), code=code)
    return cls(message, error.get("data"))
