"""memoryd_client: a small client for memoryd, the JSON-RPC 2.0 memory daemon.

Standard library only.  ``MemoryClient`` blocks; ``AsyncMemoryClient`` is for trio and imports
trio only when first used.

    from memoryd_client import MemoryClient

    with MemoryClient(user_id="alice", chat_id="team") as memory:
        memory.add("Alice prefers tea", subjects=["alice"])
        hits = memory.search("what does alice drink?")

An orchestrator that starts sandboxes mints a context token per session (same secret as the
daemon's ``auth.token_secret``) and hands the sandbox only that token:

    from memoryd_client import mint_token

    token = mint_token(secret, "alice", "team", ttl="15m")   # -> MEMORY_CONTEXT_TOKEN

``resolve_identity()`` says whom a client would speak for, without connecting: each of user id,
chat id, chat type and token from the argument, else ``MEMORY_*``, else ``ASH_*``, else the
token's (unverified) claims.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._client import MemoryClient
from ._identity import Identity, resolve_identity
from .errors import (
    ConnectionLost,
    DaemonUnavailable,
    DeadlineExceeded,
    ErrorCode,
    InternalError,
    InvalidIdentity,
    InvalidParams,
    InvalidRequest,
    LlmNotConfigured,
    MemoryClientError,
    MemorydRpcError,
    MethodNotFound,
    MissingIdentity,
    NotFound,
    Overloaded,
    ParseError,
    PayloadTooLarge,
    ProtocolError,
    RequestTimeout,
    ShuttingDown,
    StorageFull,
    Unauthorized,
    Unavailable,
)
from .paths import default_socket_path, resolve_socket_path
from .tokens import TokenError, mint_token

if TYPE_CHECKING:
    from ._trio_client import AsyncMemoryClient

__version__ = "0.1.0"

__all__ = [
    "AsyncMemoryClient",
    "ConnectionLost",
    "DaemonUnavailable",
    "DeadlineExceeded",
    "ErrorCode",
    "Identity",
    "InternalError",
    "InvalidIdentity",
    "InvalidParams",
    "InvalidRequest",
    "LlmNotConfigured",
    "MemoryClient",
    "MemoryClientError",
    "MemorydRpcError",
    "MethodNotFound",
    "MissingIdentity",
    "NotFound",
    "Overloaded",
    "ParseError",
    "PayloadTooLarge",
    "ProtocolError",
    "RequestTimeout",
    "ShuttingDown",
    "StorageFull",
    "Unauthorized",
    "TokenError",
    "Unavailable",
    "default_socket_path",
    "mint_token",
    "resolve_identity",
    "resolve_socket_path",
]


def __getattr__(name: str) -> Any:
    # Lazy: importing memoryd_client must work (and stay cheap) where trio is absent.
    if name == "AsyncMemoryClient":
        try:
            from ._trio_client import AsyncMemoryClient
        except ModuleNotFoundError as exc:
            if exc.name != "trio":
                raise
            raise ImportError("AsyncMemoryClient needs trio: pip install 'memoryd-client[trio]'", name="trio") from exc
        return AsyncMemoryClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
