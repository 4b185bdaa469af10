"""The errors a JSON-RPC caller receives: one class per code of ``memoryd_client.errors.ErrorCode``."""

from __future__ import annotations

from typing import Any, ClassVar

from memoryd.errors.base import MemorydError
from memoryd_client.errors import ErrorCode


class RpcError(MemorydError):
    """An error that reaches a JSON-RPC caller as ``{"code", "message", "data"}``.

    Each subclass names its ``ErrorCode`` and the message sent when none is given.
    """

    code: ClassVar[int] = ErrorCode.INTERNAL_ERROR
    default_message: ClassVar[str] = "Internal error"

    def __init_subclass__(cls, code: ErrorCode | None = None, message: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code
        if message is not None:
            cls.default_message = message

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)


class ParseError(RpcError, code=ErrorCode.PARSE_ERROR, message="Parse error"): ...


class InvalidRequest(RpcError, code=ErrorCode.INVALID_REQUEST, message="Invalid Request"): ...


class MethodNotFound(RpcError, code=ErrorCode.METHOD_NOT_FOUND, message="Method not found"): ...


class InvalidParams(RpcError, code=ErrorCode.INVALID_PARAMS, message="Invalid params"):
    @classmethod
    def for_field(cls, field: str, reason: str) -> InvalidParams:
        """The usual shape: the message and ``data`` both name the bad field."""
        return cls(f"Invalid params: {field}: {reason}", {"field": field, "reason": reason})


class InternalError(RpcError, code=ErrorCode.INTERNAL_ERROR, message="Internal error"): ...


class NotFound(RpcError, code=ErrorCode.NOT_FOUND, message="Not found"): ...


class Unauthorized(RpcError, code=ErrorCode.UNAUTHORIZED, message="Unauthorized"): ...


class Overloaded(RpcError, code=ErrorCode.OVERLOADED, message="Overloaded, retry later"): ...


class PayloadTooLarge(RpcError, code=ErrorCode.PAYLOAD_TOO_LARGE, message="Payload too large"): ...


class DeadlineExceeded(RpcError, code=ErrorCode.DEADLINE_EXCEEDED, message="Request deadline exceeded"): ...


class ShuttingDown(RpcError, code=ErrorCode.SHUTTING_DOWN, message="Daemon is shutting down, retry after restart"): ...


class Unavailable(RpcError, code=ErrorCode.UNAVAILABLE, message="Temporarily unavailable, retry later"): ...


class LlmNotConfigured(
    RpcError,
    code=ErrorCode.LLM_NOT_CONFIGURED,
    message='Extraction is off: set [llm] provider ("openai" or "ollama"), url and model',
):
    """An extract method was called while ``[llm] provider = "none"`` (the default)."""


class StorageFull(RpcError, code=ErrorCode.STORAGE_FULL, message="Storage full: nothing was written, retry later"):
    """The daemon's disk is full (``DiskFull`` below the service); it recovers by itself."""


#: The class for each code (the classes carry their codes).
RPC_ERRORS_BY_CODE: dict[int, type[RpcError]] = {cls.code: cls for cls in RpcError.__subclasses__()}
