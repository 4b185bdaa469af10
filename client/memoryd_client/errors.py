"""The client's error hierarchy, and memoryd's table of JSON-RPC error codes.

:class:`ErrorCode` is the one source of the codes: the daemon (``memoryd/errors/rpc.py``) reads it
from here, since the client must run where the daemon is not installed and not the other way
round.

    MemoryClientError
    ├── DaemonUnavailable        no socket, connection refused, or no permission to connect
    ├── ConnectionLost           the connection broke again after one reconnect-and-resend
    ├── RequestTimeout           no reply within the client's timeout (also a builtin TimeoutError)
    ├── ProtocolError            the daemon's reply was not a JSON-RPC 2.0 response to our call
    ├── MissingIdentity          no user id: neither passed, nor in the environment, nor in a token
    ├── InvalidIdentity          a user or chat id breaks the identifier rule (also a ValueError)
    └── MemorydRpcError          the daemon answered with an error: .code .message .data
        ├── ParseError           one class per ErrorCode member, named after it
        ├── InvalidRequest
        ├── MethodNotFound
        ├── InvalidParams        .field and .reason name the bad parameter
        ├── InternalError
        ├── NotFound
        ├── Unauthorized
        ├── Overloaded           retry later
        ├── PayloadTooLarge      the daemon closed the connection
        ├── DeadlineExceeded
        ├── ShuttingDown         retry after the daemon restarts
        ├── Unavailable          the database is busy (locked by another process); retry
        ├── LlmNotConfigured     extraction is off: the daemon's [llm] names no provider
        └── StorageFull          the daemon's disk is full: nothing was written; retry later

An error code this client does not know becomes a plain ``MemorydRpcError``.
"""

from __future__ import annotations

import enum
from typing import Any, Dict, Optional, Type


class ErrorCode(enum.IntEnum):
    """Every error code memoryd answers with; each has one exception class here and one in the
    daemon, named as the member in CamelCase (``INVALID_PARAMS`` -> ``InvalidParams``)."""

    # JSON-RPC 2.0's own codes.
    PARSE_ERROR = -32700  # not JSON, or not UTF-8
    INVALID_REQUEST = -32600  # not a JSON-RPC 2.0 request object
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602  # data = {"field": ..., "reason": ...}
    INTERNAL_ERROR = -32603  # a bug or an unexpected failure; the daemon logged it
    # memoryd's application codes.
    NOT_FOUND = -32001
    UNAUTHORIZED = -32002
    OVERLOADED = -32003  # too many connections or requests; retry later
    PAYLOAD_TOO_LARGE = -32004  # message over max_message_bytes; the connection is closed
    DEADLINE_EXCEEDED = -32005  # the call ran past the daemon's request_timeout
    SHUTTING_DOWN = -32006  # retry after the daemon restarts
    UNAVAILABLE = -32007  # something the call needs is busy or down (the database); retry
    LLM_NOT_CONFIGURED = -32008  # extraction is off: the daemon's [llm] names no provider
    STORAGE_FULL = -32009  # the daemon's disk is full: nothing was written; retry once space returns


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


class InvalidIdentity(MemoryClientError, ValueError):
    """A user id or chat id (argument or environment) breaks the identifier rule
    (``memoryd_client.identifiers``); ``field`` names it.  Nothing was sent."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class MemorydRpcError(MemoryClientError):
    """The daemon answered with a JSON-RPC error object."""

    code: int = ErrorCode.INTERNAL_ERROR

    def __init_subclass__(cls, code: Optional[ErrorCode] = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code

    def __init__(self, message: str, data: Any = None, code: Optional[int] = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        self.data = data
        super().__init__(message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r}, data={self.data!r})"


class ParseError(MemorydRpcError, code=ErrorCode.PARSE_ERROR): ...


class InvalidRequest(MemorydRpcError, code=ErrorCode.INVALID_REQUEST): ...


class MethodNotFound(MemorydRpcError, code=ErrorCode.METHOD_NOT_FOUND): ...


class InvalidParams(MemorydRpcError, code=ErrorCode.INVALID_PARAMS):
    @property
    def field(self) -> Optional[str]:
        """The parameter the daemon rejected, when it said."""
        return self.data.get("field") if isinstance(self.data, dict) else None

    @property
    def reason(self) -> Optional[str]:
        return self.data.get("reason") if isinstance(self.data, dict) else None


class InternalError(MemorydRpcError, code=ErrorCode.INTERNAL_ERROR): ...


class NotFound(MemorydRpcError, code=ErrorCode.NOT_FOUND): ...


class Unauthorized(MemorydRpcError, code=ErrorCode.UNAUTHORIZED): ...


class Overloaded(MemorydRpcError, code=ErrorCode.OVERLOADED): ...


class PayloadTooLarge(MemorydRpcError, code=ErrorCode.PAYLOAD_TOO_LARGE):
    def sized(self, sent_bytes: int) -> PayloadTooLarge:
        """This error with a message naming the size sent and the daemon's limit, when the
        request (not the reply) was too large."""
        limit = self.data.get("max_message_bytes") if isinstance(self.data, dict) else None
        if not isinstance(limit, int):
            return self
        message = (
            f"{self.message}: the request was {sent_bytes} bytes and the daemon accepts at most "
            f"{limit} bytes per message (limits.max_message_bytes)"
        )
        return PayloadTooLarge(message, self.data)


class DeadlineExceeded(MemorydRpcError, code=ErrorCode.DEADLINE_EXCEEDED): ...


class ShuttingDown(MemorydRpcError, code=ErrorCode.SHUTTING_DOWN): ...


class Unavailable(MemorydRpcError, code=ErrorCode.UNAVAILABLE): ...


class LlmNotConfigured(MemorydRpcError, code=ErrorCode.LLM_NOT_CONFIGURED): ...


class StorageFull(MemorydRpcError, code=ErrorCode.STORAGE_FULL): ...


#: The class for each code.
RPC_ERRORS_BY_CODE: Dict[int, Type[MemorydRpcError]] = {cls.code: cls for cls in MemorydRpcError.__subclasses__()}


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
