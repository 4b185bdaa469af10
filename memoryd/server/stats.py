"""The server's counters, shared by the listener and its connections (they report, never decide)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ServerStats:
    """Counted since start; ``system.health`` shows them under ``server``."""

    connections_total: int = 0
    #: Refused with Overloaded: no slot was left for the peer (see server/admission.py).
    connections_rejected: int = 0
    #: Admitted past max_connections into a reserved slot: a trusted uid, or a health probe.
    connections_reserved: int = 0
    #: Frames over max_message_bytes (each answered -32004 and its connection closed).
    oversized_messages: int = 0
    #: Connections cut off because their client stopped reading replies for idle_timeout.
    stalled_connections: int = 0
    #: Connections closed because a frame was not complete within frame_timeout (-32005).
    frame_timeouts: int = 0
    #: Connections closed because an unfinished frame found max_buffered_bytes spent (-32003).
    over_budget_connections: int = 0
    #: Calls cancelled because their client hung up (queued or running; committed work stays).
    calls_cancelled_by_hangup: int = 0
    #: Connections accepted per peer uid, since start.
    connections_by_uid: Counter[int] = field(default_factory=Counter)
