"""Who is calling, as every handler sees it, and the shape of a handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CallContext", "Handler"]


@dataclass
class CallContext:
    """Who is calling: the peer's credentials (SO_PEERCRED) and the connection it came on."""

    peer_uid: int | None = None
    peer_pid: int | None = None
    peer_gid: int | None = None
    connection_id: int = 0
    extras: dict[str, Any] = field(default_factory=dict)


#: ``await handler(params, ctx)``: params is the method's decoded params Struct.
Handler = Callable[[Any, CallContext], Awaitable[Any]]
