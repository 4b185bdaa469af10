"""memoryd's one error hierarchy.

Every error a caller can see carries its JSON-RPC code; the RPC boundary maps exceptions to
error responses in one place (``memoryd.rpc.dispatch``).  Anything else that escapes a handler
becomes -32603 with a log line.

    MemorydError
    ├── RpcError                 an error a JSON-RPC caller receives
    │   ├── ParseError           -32700  not JSON, or not UTF-8
    │   ├── InvalidRequest       -32600  not a JSON-RPC 2.0 request object
    │   ├── MethodNotFound       -32601
    │   ├── InvalidParams        -32602  data = {"field": ..., "reason": ...}
    │   ├── InternalError        -32603
    │   ├── NotFound             -32001
    │   ├── Unauthorized         -32002
    │   ├── Overloaded           -32003  too many connections or requests; retry later
    │   ├── PayloadTooLarge      -32004  message over max_message_bytes; connection closed
    │   ├── DeadlineExceeded     -32005  the request ran past request_timeout
    │   ├── ShuttingDown         -32006  the daemon is stopping; retry after restart
    │   ├── Unavailable          -32007  a resource the call needs is busy or missing; retry
    │   │   └── StoreBusy                the database stayed locked past busy_timeout
    │   └── LlmNotConfigured     -32008  extraction is off: [llm] provider/url/model are not set
    ├── ConfigError              bad configuration: start-up stops, naming the key
    ├── StartupError             e.g. a live daemon already holds the socket
    ├── StoreError               the database refused something
    │   └── EmbeddingModelMismatch  the store was built with another model (run `memoryd reindex`)
    ├── EmbedderError            an embedding backend is down, slow or returned garbage
    └── LlmError                 the LLM backend failed; ``retry_later`` says what a job does next
        ├── LlmUnavailable          down, too slow, 429/5xx after the retries (retry later)
        ├── LlmRefused              a 4xx: bad key, unknown model, request too large (park)
        └── LlmBadReply             replies never decoded into the expected shape (park)
"""

from __future__ import annotations

from typing import Any, ClassVar


class MemorydError(Exception):
    """Base of every error memoryd raises on purpose."""


class RpcError(MemorydError):
    """An error that reaches a JSON-RPC caller as ``{"code", "message", "data"}``."""

    code: ClassVar[int] = -32603
    default_message: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)

    def to_error_object(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(RpcError):
    code = -32700
    default_message = "Parse error"


class InvalidRequest(RpcError):
    code = -32600
    default_message = "Invalid Request"


class MethodNotFound(RpcError):
    code = -32601
    default_message = "Method not found"


class InvalidParams(RpcError):
    code = -32602
    default_message = "Invalid params"

    @classmethod
    def for_field(cls, field: str, reason: str) -> InvalidParams:
        """The usual shape: the message and ``data`` both name the bad field."""
        return cls(f"Invalid params: {field}: {reason}", {"field": field, "reason": reason})


class InternalError(RpcError):
    code = -32603
    default_message = "Internal error"


class NotFound(RpcError):
    code = -32001
    default_message = "Not found"


class Unauthorized(RpcError):
    code = -32002
    default_message = "Unauthorized"


class Overloaded(RpcError):
    code = -32003
    default_message = "Overloaded, retry later"


class PayloadTooLarge(RpcError):
    code = -32004
    default_message = "Payload too large"


class DeadlineExceeded(RpcError):
    code = -32005
    default_message = "Request deadline exceeded"


class ShuttingDown(RpcError):
    code = -32006
    default_message = "Daemon is shutting down, retry after restart"


class Unavailable(RpcError):
    code = -32007
    default_message = "Temporarily unavailable, retry later"


class StoreBusy(Unavailable):
    """Another process (an admin command such as a large import) held the database's write
    lock past ``storage.busy_timeout_ms``; nothing was written, the call can be retried."""

    default_message = "Database is busy (locked by another process), retry later"


class LlmNotConfigured(RpcError):
    """An extract method was called while ``[llm] provider = "none"`` (the default)."""

    code = -32008
    default_message = 'Extraction is off: set [llm] provider ("openai" or "ollama"), url and model'


#: Every caller-visible error class by code, for documentation and for the client.
RPC_ERRORS_BY_CODE: dict[int, type[RpcError]] = {
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


class ConfigError(MemorydError):
    """The configuration is wrong; the message names the key and what was wrong."""


class StartupError(MemorydError):
    """The daemon cannot start (socket held by a live daemon, unwritable data dir, ...)."""


class StoreError(MemorydError):
    """The database refused an operation."""


class EmbeddingModelMismatch(StoreError):
    """The store's vectors come from another model; mixing vector spaces is refused."""


class EmbedderError(MemorydError):
    """An embedding backend failed: down, too slow, or returned something unusable."""


class LlmError(MemorydError):
    """An LLM backend failed.  The message names the server, never the key or the prompt."""

    #: True when the same request may well succeed later (the job is retried with backoff);
    #: False when it needs a person (the job is parked with the reason).
    retry_later: ClassVar[bool] = False


class LlmUnavailable(LlmError):
    """Connection refused or reset, no reply in time, or 429/5xx on every attempt."""

    retry_later = True

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        #: The server's last Retry-After hint in seconds (capped), for the job's next try.
        self.retry_after = retry_after


class LlmRefused(LlmError):
    """The server refused the request itself (401, 403, 404, a 400 in every output mode)."""


class LlmBadReply(LlmError):
    """Every attempt got a reply that was empty, not JSON, or not the requested shape."""
