"""Who is calling, as every handler sees it, and the shapes of a handler."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = ["NOT_NOW", "CallContext", "Handler", "NotNow", "NowHandler"]


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


class _NotNow(enum.Enum):
    NOT_NOW = "not-now"


#: What a ``now`` handler returns when it cannot answer without waiting: run the call as a task.
NOT_NOW: Final = _NotNow.NOT_NOW
NotNow = Literal[_NotNow.NOT_NOW]

#: ``handler(params, ctx)``, synchronous: the result, or NOT_NOW when answering needs to wait.
NowHandler = Callable[[Any, CallContext], Any]
