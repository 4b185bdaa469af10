"""Who gets a connection slot: a fair share per peer uid, and room kept for the host and for probes.

Without it one peer could take every slot (512 idle connections) and lock everyone out, health
probes and the host's orchestrator included.  The policy, without I/O:

* ``max_connections`` regular slots, of which one uid may hold ``max_connections_per_uid``
  (uids listed in ``auth.trusted_uids`` are exempt from the per-uid share);
* ``reserved_connections`` more, for trusted uids only, used once the regular slots are full;
* ``health_probe_connections`` more for anyone under their per-uid share: such a connection may
  call ``system.health`` only (anything else is answered -32003) and is closed after
  ``frame_timeout`` of silence, so probes cannot be hoarded.

Everyone else is answered -32003 Overloaded and closed (server/listener.py).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Admission", "CallShares", "Slot", "Ticket"]

#: The uid counted for a peer whose credentials could not be read.
UNKNOWN_UID = -1


class Slot(enum.Enum):
    REGULAR = "regular"
    #: Past max_connections, for a trusted uid: served in full.
    RESERVED = "reserved"
    #: Past max_connections (or the uid's share): system.health only.
    PROBE = "probe"


@dataclass(frozen=True, slots=True)
class Ticket:
    """What :meth:`Admission.admit` handed out; given back with :meth:`Admission.release`."""

    uid: int
    slot: Slot


class Admission:
    def __init__(
        self,
        *,
        max_connections: int,
        max_per_uid: int,
        reserved: int,
        probes: int,
        trusted_uids: Iterable[int] = (),
    ) -> None:
        self.max_connections = max_connections
        self.max_per_uid = max_per_uid
        self.reserved = reserved
        self.probes = probes
        self.trusted_uids = frozenset(trusted_uids)
        self.open: Counter[Slot] = Counter()
        #: Open regular and reserved connections per uid (probes are not a share of anything).
        self.open_by_uid: Counter[int] = Counter()

    def admit(self, uid: int | None) -> Ticket | None:
        """A slot for a new connection from ``uid``, or None: refuse it."""
        peer = UNKNOWN_UID if uid is None else uid
        trusted = peer in self.trusted_uids
        within_share = trusted or self.open_by_uid[peer] < self.max_per_uid
        if within_share and self.open[Slot.REGULAR] < self.max_connections:
            slot = Slot.REGULAR
        elif trusted and self.open[Slot.RESERVED] < self.reserved:
            slot = Slot.RESERVED
        elif within_share and self.open[Slot.PROBE] < self.probes:
            slot = Slot.PROBE
        else:
            return None
        self.open[slot] += 1
        if slot is not Slot.PROBE:
            self.open_by_uid[peer] += 1
        return Ticket(peer, slot)

    def release(self, ticket: Ticket) -> None:
        self.open[ticket.slot] -= 1
        if ticket.slot is not Slot.PROBE:
            self.open_by_uid[ticket.uid] -= 1
            if not self.open_by_uid[ticket.uid]:
                del self.open_by_uid[ticket.uid]


class CallShares:
    """Calls one peer uid may have running across all its connections (``max_inflight_per_uid``;
    uids in ``auth.trusted_uids`` are exempt).  Without it a peer with many connections queues
    hundreds of calls (30 connections of 32 each) ahead of everyone else's; past its share a
    call is answered -32003 with ``retry_after`` without running."""

    def __init__(self, max_per_uid: int, trusted_uids: Iterable[int] = ()) -> None:
        self.max_per_uid = max_per_uid
        self.trusted_uids = frozenset(trusted_uids)
        self.running: Counter[int] = Counter()
        #: Calls answered -32003 because their uid's share was taken.
        self.refused = 0

    def take(self, uid: int | None) -> bool:
        peer = UNKNOWN_UID if uid is None else uid
        if peer not in self.trusted_uids and self.running[peer] >= self.max_per_uid:
            self.refused += 1
            return False
        self.running[peer] += 1
        return True

    def give_back(self, uid: int | None) -> None:
        peer = UNKNOWN_UID if uid is None else uid
        self.running[peer] -= 1
        if not self.running[peer]:
            del self.running[peer]
