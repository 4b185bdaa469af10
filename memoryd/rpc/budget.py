"""Memory the protocol holds on behalf of peers, bounded: one shared budget for the whole server.

Two things grow with what peers send: frames received but not yet complete, and replies built
but not yet sent (a peer that never reads keeps them).  Both are charged to one
:class:`SharedBudget` (``limits.max_buffered_bytes``).  Received bytes are already in memory
when they are charged, so that side cannot be refused: a connection that wants more bytes for an
unfinished frame while the budget is spent is closed instead (rpc/connection.py).  Reply bytes
are charged as each reply is built (:class:`ReplyBudget`), so a batch stops building replies as
soon as its connection's share (``max_reply_bytes``) or the shared budget runs out: its
remaining calls are answered with a short error, not run.
"""

from __future__ import annotations

from memoryd.errors import Overloaded, PayloadTooLarge, RpcError

__all__ = ["ReplyBudget", "SharedBudget"]


class SharedBudget:
    """Bytes buffered across every connection; ``limit`` may be passed by what cannot be refused."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int | float) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self.used = 0

    @property
    def exhausted(self) -> bool:
        return self.used >= self.limit

    def try_take(self, size: int) -> bool:
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def charge(self, size: int) -> None:
        """Bytes already held (received): counted even past the limit."""
        self.used += size

    def release(self, size: int) -> None:
        self.used -= size


class ReplyBudget:
    """What one connection may hold in unsent replies: ``max_reply_bytes``, within the shared budget.

    The connection's driver releases a reply's bytes once it is sent (or the peer is gone).
    """

    __slots__ = ("max_reply_bytes", "pending", "shared")

    def __init__(self, max_reply_bytes: int, shared: SharedBudget) -> None:
        self.max_reply_bytes = max_reply_bytes
        self.shared = shared
        #: Bytes of replies built on this connection and not yet released.
        self.pending = 0

    def take(self, size: int) -> RpcError | None:
        """Charge a reply of ``size`` bytes; the error to answer instead when it does not fit."""
        if self.pending + size > self.max_reply_bytes:
            return PayloadTooLarge(
                "Reply too large: over max_reply_bytes; the rest of the batch was not run",
                {"limit": "max_reply_bytes", "max_reply_bytes": self.max_reply_bytes},
            )
        shared = self.shared
        if shared.used + size > shared.limit:  # SharedBudget.try_take, inlined: once per reply
            return Overloaded(
                "Overloaded, retry later: the daemon's reply buffers are full",
                {"limit": "max_buffered_bytes", "reason": "reply buffers full"},
            )
        shared.used += size
        self.pending += size
        return None

    def settle(self, taken: int, final_size: int) -> None:
        """A message's reply came to ``final_size`` bytes after ``taken`` were charged for its parts
        (brackets, commas and short error replies are charged here, without refusal)."""
        self.pending += final_size - taken
        self.shared.charge(final_size - taken)

    def release(self, size: int) -> None:
        """A reply of ``size`` bytes was sent, or will never be."""
        self.pending -= size
        self.shared.used -= size
