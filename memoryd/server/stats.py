"""The server's counters, shared by the listener and its connections (they report, never decide)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ServerStats:
    """Counted since start; ``system.health`` shows them under ``server``."""

    connections_total: int = 0
    #: Refused with Overloaded because max_connections were open.
    connections_rejected: int = 0
    #: Frames over max_message_bytes (each answered -32004 and its connection closed).
    oversized_messages: int = 0
    #: Connections cut off because their client stopped reading replies for idle_timeout.
    stalled_connections: int = 0
    #: Connections accepted per peer uid, since start.
    connections_by_uid: Counter[int] = field(default_factory=Counter)
