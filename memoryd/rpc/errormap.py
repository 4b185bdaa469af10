"""Where errors are mapped to replies: ``rpc_error_for`` turns any exception into the RpcError
its caller receives, and nothing else in memoryd makes that choice.

An ``RpcError`` is its own reply.  Every other ``MemorydError`` class has its own entry in
``ERROR_REPLIES``: adding a class to ``memoryd/errors/`` means adding one line here, and
tests/test_rpc_errormap.py fails until there is one (httpx's ``test_httpcore_all_exceptions_mapped``
keeps its transport's mapping whole the same way).  Anything else is a bug: -32603.

Every -32603 is logged once, with its traceback and the method's name but never the params,
which may hold memory contents.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from memoryd.errors import (
    AmbiguousIdPrefix,
    BrokenInvariant,
    ConfigError,
    DiskFull,
    EmbedderError,
    EmbeddingModelMismatch,
    ExtractedMessagesGone,
    ExtractionJobGone,
    InternalError,
    InvalidParams,
    LlmBadReply,
    LlmError,
    LlmRefused,
    LlmUnavailable,
    MemorydError,
    NotFound,
    PeopleLimitReached,
    RpcError,
    StartupError,
    StorageFull,
    StorageUnusable,
    StoreBusy,
    StoreConflict,
    StoreCorrupt,
    StoreError,
    StoreRefused,
    StoreUnreachable,
    SupersedeRefused,
    Unavailable,
    UnknownListCursor,
    UnsupportedSqliteVec,
    lone_leaf,
)

__all__ = ["ERROR_REPLIES", "rpc_error_for"]

log = logging.getLogger("memoryd.rpc")


def _internal(exc: Exception) -> RpcError:
    """A failure the caller can do nothing about; the log line says what it was."""
    return InternalError()


def _store_busy(exc: StoreBusy) -> RpcError:
    # Nothing was written: the caller may retry once the other process lets go.
    return Unavailable(
        "Database is busy (locked by another process), retry later", {"busy_timeout_ms": exc.busy_timeout_ms}
    )


def _disk_full(exc: DiskFull) -> RpcError:
    # Rolled back, so the call can be retried as is; the store logged the state change once.
    return StorageFull(data={"retryable": True})


def _store_corrupt(exc: StoreCorrupt) -> RpcError:
    # Not a bug to log per call: the store logged the damage once and health says degraded.
    return Unavailable(
        "Database is damaged: writes are stopped until the operator runs `memoryd check` and restores a backup",
        {"storage": "corrupt"},
    )


def _ambiguous_id(exc: AmbiguousIdPrefix) -> RpcError:
    # memory.get/delete answer this themselves (naming their field); any other id lookup too.
    return InvalidParams.for_field("memory_id", str(exc))


def _unknown_cursor(exc: UnknownListCursor) -> RpcError:
    return InvalidParams.for_field("before_id", str(exc))


def _supersede_refused(exc: SupersedeRefused) -> RpcError:
    # Not visible is "not found", exactly as memory.get says it: another scope's ids never leak.
    data = {"field": exc.field, "reason": exc.reason}
    if exc.found:
        return InvalidParams.for_field(exc.field, exc.reason)
    return NotFound("No memory visible to you matches that id", data)


def _people_limit(exc: PeopleLimitReached) -> RpcError:
    return InvalidParams.for_field(exc.field, str(exc))


def _backend_down(what: str, backend: str) -> Callable[[Exception], RpcError]:
    # The exception's message may name a backend's URL: it stays in the daemon's log.
    def reply(exc: Exception) -> RpcError:
        return Unavailable(f"{what} unavailable, retry later", {"backend": backend})

    return reply


#: What a caller receives for each MemorydError that is not an RpcError; the entry of the
#: nearest class in the exception's MRO applies, but the test wants every class listed by itself.
ERROR_REPLIES: dict[type[MemorydError], Callable[[Any], RpcError]] = {
    StoreError: _internal,
    StoreBusy: _store_busy,
    StoreUnreachable: lambda exc: Unavailable("Database unavailable, retry later", {"backend": exc.backend}),
    StoreConflict: lambda exc: Unavailable("Concurrent writes conflicted, retry"),
    DiskFull: _disk_full,
    StoreCorrupt: _store_corrupt,
    EmbeddingModelMismatch: _internal,  # the daemon refuses to start with it; mid-call it is a bug
    AmbiguousIdPrefix: _ambiguous_id,
    UnknownListCursor: _unknown_cursor,
    SupersedeRefused: _supersede_refused,
    PeopleLimitReached: _people_limit,
    BrokenInvariant: _internal,  # the service validates first: reaching the store with it is a bug
    ExtractionJobGone: _internal,  # raised only inside the extraction worker, which expects it
    ExtractedMessagesGone: _internal,  # memory.extract answers it as its message not found
    # Searches fall back to keywords and adds never wait on a failing embedder: only a call that
    # cannot do without one gets this.
    EmbedderError: _backend_down("Embedding backend", "embedder"),
    LlmError: _internal,
    LlmUnavailable: _backend_down("LLM backend", "llm"),  # down, slow, 429/5xx: worth a retry
    LlmRefused: _internal,  # a bad key or an unknown model: the operator must act (logged)
    LlmBadReply: _internal,  # the model never answered in shape: retrying the call will not help
    ConfigError: _internal,  # raised only while starting up
    StartupError: _internal,  # raised only while starting up
    StorageUnusable: _internal,  # raised only while starting up
    StoreRefused: _internal,  # raised only while starting up
    UnsupportedSqliteVec: _internal,  # raised only while starting up
}


def rpc_error_for(exc: Exception, method: str, connection_id: int) -> RpcError:
    """The error a call to ``method`` answers with after raising ``exc``."""
    # A nursery in a method wraps what its body raises: the caller gets that error's reply.
    leaf = lone_leaf(exc)
    exc = leaf if isinstance(leaf, Exception) else exc
    error = exc if isinstance(exc, RpcError) else _translate(exc)
    if isinstance(error, InternalError):
        log.error("method %r failed on connection %d", method, connection_id, exc_info=exc)
    return error


def _translate(exc: Exception) -> RpcError:
    for cls in type(exc).__mro__:
        translate = ERROR_REPLIES.get(cls)
        if translate is not None:
            return translate(exc)
    return _internal(exc)
