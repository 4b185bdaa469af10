"""Where errors are mapped to replies: ``rpc_error_for`` turns any exception into the RpcError
its caller receives, and nothing else in memoryd makes that choice.

An ``RpcError`` is its own reply.  Every other ``MemorydError`` class has its own entry in
``ERROR_REPLIES``: adding a class to ``memoryd/errors.py`` means adding one line here, and
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
    ConfigError,
    EmbedderError,
    EmbeddingModelMismatch,
    InternalError,
    MemorydError,
    RpcError,
    StartupError,
    StoreBusy,
    StoreError,
    Unavailable,
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


def _embedder_unavailable(exc: EmbedderError) -> RpcError:
    # Searches fall back to keywords and adds never wait on a failing embedder, so this is only
    # reached by a call that cannot do without one.  The message may name a backend's URL: not sent.
    return Unavailable("Embedding backend unavailable, retry later", {"backend": "embedder"})


#: What a caller receives for each MemorydError that is not an RpcError; the entry of the
#: nearest class in the exception's MRO applies, but the test wants every class listed by itself.
ERROR_REPLIES: dict[type[MemorydError], Callable[[Any], RpcError]] = {
    StoreError: _internal,
    StoreBusy: _store_busy,
    EmbeddingModelMismatch: _internal,  # the daemon refuses to start with it; mid-call it is a bug
    EmbedderError: _embedder_unavailable,
    ConfigError: _internal,  # raised only while starting up
    StartupError: _internal,  # raised only while starting up
}


def rpc_error_for(exc: Exception, method: str, connection_id: int) -> RpcError:
    """The error a call to ``method`` answers with after raising ``exc``."""
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
