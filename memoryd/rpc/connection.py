"""One connection's protocol state, without I/O (h11's ``Connection`` is the model).

A driver (server/connection.py) feeds what it receives to :meth:`RpcConnection.receive_data`,
asks :meth:`RpcConnection.next_event` what to do, runs each message it is handed, frames the
reply with :meth:`RpcConnection.frame` and reports it with :meth:`RpcConnection.message_done`.
Everything that decides what happens on a connection lives here and is tested without sockets:
the framing (chosen by the first byte), how many messages run at once, how long to wait for
bytes (idle, shutdown linger), the -32004 reply and close after an oversized frame, and a last
line without its newline at end of input.

Limits are constructor arguments (:class:`ConnectionLimits`).  Time: a frame once started must
be complete within ``frame_timeout`` however slowly its bytes trickle in, and ``idle_timeout``
counts from the last message, so stray whitespace does not keep a connection open.  Memory:
what is buffered is charged to the server's :class:`SharedBudget` (rpc/budget.py); a connection
that needs more bytes for an unfinished frame while that budget is spent is answered -32003
and closed, and replies are charged through :attr:`RpcConnection.replies`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from memoryd.errors import DeadlineExceeded, Overloaded, PayloadTooLarge
from memoryd.rpc.budget import ReplyBudget, SharedBudget
from memoryd.rpc.envelope import encode_error
from memoryd.rpc.framing import FrameDecoder, Framing, encode_frame

__all__ = ["Close", "CloseReason", "ConnectionLimits", "RpcConnection", "Wait"]


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_message_bytes: int
    #: Messages one connection may have running; past it reading pauses (backpressure).
    max_inflight: int
    #: Seconds to wait for bytes while nothing is running; also how long a reply may take to send.
    idle_timeout: float
    #: During shutdown, how long a connection must stay quiet before it is closed: a client may
    #: have a request on the wire as shutdown begins, and it is answered ShuttingDown, not dropped.
    shutdown_linger: float = 0.25
    #: Seconds a frame may take to arrive whole once its first byte is in (a trickle holds no slot).
    frame_timeout: float = 10.0
    #: Bytes of replies built and not yet sent that one connection may hold (one batch's reply
    #: included); past it, a batch's remaining calls are answered -32004 without running.
    max_reply_bytes: int = 4 * 1024 * 1024
    #: Calls in one batch; a longer batch is answered -32600 whole.
    max_batch_calls: int = 1000

    def __post_init__(self) -> None:
        if min(self.max_message_bytes, self.max_inflight, self.max_reply_bytes, self.max_batch_calls) < 1:
            raise ValueError("max_message_bytes, max_inflight, max_reply_bytes and max_batch_calls must be >= 1")
        if min(self.idle_timeout, self.shutdown_linger, self.frame_timeout) <= 0:
            raise ValueError("idle_timeout, shutdown_linger and frame_timeout must be > 0")


class Wait(enum.Enum):
    """What the driver waits for before asking :meth:`RpcConnection.next_event` again."""

    #: Bytes: receive some and pass them (b"" at end of input) to ``receive_data``, giving up at
    #: ``read_deadline`` (then ``read_wait_ended``).
    NEED_DATA = "need-data"
    #: A running message to finish (``message_done``): ``max_inflight`` are running, or the
    #: connection's unsent replies have reached ``max_reply_bytes``.
    SLOT = "slot"


class CloseReason(enum.Enum):
    END_OF_INPUT = "end-of-input"
    IDLE = "idle"
    SHUTDOWN = "shutdown"
    TOO_LARGE = "too-large"
    #: A frame started and was not complete within ``frame_timeout`` (answered -32005).
    FRAME_TIMEOUT = "frame-timeout"
    #: An unfinished frame needed more bytes while the shared budget was spent (answered -32003).
    OVER_BUDGET = "over-budget"
    #: A reply could not be sent for idle_timeout: the peer stopped reading.
    STALLED = "stalled"


@dataclass(frozen=True, slots=True)
class Close:
    """Read no more: send ``reply`` (already framed) if there is one, let running messages finish
    and send their replies, then close."""

    reason: CloseReason
    reply: bytes | None = None


class RpcConnection:
    """The server side of one connection."""

    def __init__(self, limits: ConnectionLimits, budget: SharedBudget | None = None) -> None:
        """``budget`` is shared by every connection of a server; alone, a connection gets its own."""
        self.limits = limits
        self.in_flight = 0
        self.shutting_down = False
        self.budget = budget if budget is not None else SharedBudget(math.inf)
        #: Charge each reply here; release it once sent (server/connection.py does).
        self.replies = ReplyBudget(limits.max_reply_bytes, self.budget)
        self._decoder = FrameDecoder(limits.max_message_bytes)
        self._end_of_input = False
        self._closed: Close | None = None
        # Received bytes currently charged to the budget.
        self._charged = 0
        # When the unfinished frame began, and when the connection last went quiet; None until
        # read_deadline anchors them at its ``now`` (this object never reads a clock itself).
        self._frame_started: float | None = None
        self._idle_since: float | None = None
        # When the connection last went quiet during shutdown (anchored like _idle_since): the
        # linger counts from there, not from each wait, or a quiet peer would keep it open
        # until the server's shutdown_grace ran out.
        self._quiet_since: float | None = None

    @property
    def framing(self) -> Framing | None:
        """None until the first byte has arrived."""
        return self._decoder.framing

    def receive_data(self, data: bytes) -> None:
        """Bytes from the peer; ``b""`` means end of input."""
        if data:
            self._decoder.feed(data)
            self._charged += len(data)
            self.budget.charge(len(data))
        else:
            self._end_of_input = True

    def next_event(self) -> bytes | Wait | Close:
        """A message to run (its payload), something to wait for, or :class:`Close`.

        Once a Close is returned it is returned again on every later call.
        """
        if self._closed is not None:
            return self._closed
        if self.in_flight >= self.limits.max_inflight or (
            self.in_flight and self.replies.pending >= self.limits.max_reply_bytes
        ):
            # Running more would queue more replies for a peer that is not reading them.
            return Wait.SLOT
        try:
            payload = self._decoder.next_message()
            if payload is None and self._end_of_input:
                # A last line without its newline still counts (`printf '{...}' | nc -U`).
                payload = self._decoder.end_of_input()
                if payload is None:
                    return self._close(CloseReason.END_OF_INPUT)
        except PayloadTooLarge as exc:
            # The rest of the stream cannot be framed any more: answer, then close.
            return self._close(CloseReason.TOO_LARGE, self.frame(encode_error(None, exc)))
        decoder = self._decoder
        if self._charged != decoder.buffered:
            self.budget.release(self._charged - decoder.buffered)
            self._charged = decoder.buffered
        if payload is None:
            if self.budget.exhausted and decoder.has_partial_frame:
                # Reading on would buffer more of a frame the daemon has no room for.
                refusal = Overloaded(
                    "Overloaded, retry later: the daemon's receive buffers are full",
                    {"limit": "max_buffered_bytes", "reason": "receive buffers full"},
                )
                return self._close(CloseReason.OVER_BUDGET, self.frame(encode_error(None, refusal)))
            return Wait.NEED_DATA
        self.in_flight += 1
        self._frame_started = self._idle_since = self._quiet_since = None
        return payload

    def frame(self, reply: bytes) -> bytes:
        """``reply`` framed as this connection's client frames its messages."""
        return encode_frame(self._decoder.framing or Framing.LINES, reply)

    def message_done(self) -> None:
        """A message handed out by ``next_event`` has finished (its reply, if any, is sent)."""
        self.in_flight -= 1

    def send_stalled(self) -> None:
        """A reply made no progress for ``idle_timeout``: the next event is :class:`Close`, so
        the messages still buffered are not run for a peer that reads nothing."""
        self._close(CloseReason.STALLED)

    def begin_shutdown(self) -> None:
        """Messages keep being read and run (the method table answers them ShuttingDown) until
        nothing is running and the peer has been quiet for ``shutdown_linger``."""
        self.shutting_down = True
        self._quiet_since = None

    def read_deadline(self, now: float) -> float:
        """When to stop waiting for bytes (then call :meth:`read_wait_ended`); ``inf``: never.

        An unfinished frame must be whole ``frame_timeout`` after it began, whatever else
        happens.  Otherwise only an idle connection times out, ``idle_timeout`` after its last
        message (bytes that make no message do not count): while a message runs, its deadline
        is the method table's business.  The driver asks before each wait for bytes and again
        whenever ``in_flight`` drops or shutdown begins.
        """
        limits = self.limits
        if self._decoder.has_partial_frame:
            if self._frame_started is None:
                self._frame_started = now
            frame_deadline = self._frame_started + limits.frame_timeout
            if self.shutting_down:
                return min(self._linger_deadline(now), frame_deadline)
            return frame_deadline
        self._frame_started = None
        if self.in_flight:
            self._idle_since = self._quiet_since = None
            return math.inf
        if self.shutting_down:
            return self._linger_deadline(now)
        if self._idle_since is None:
            self._idle_since = now
        return self._idle_since + limits.idle_timeout

    def _linger_deadline(self, now: float) -> float:
        """``shutdown_linger`` after the connection went quiet (shutdown began, or its last
        message finished); asking again later does not move it."""
        if self._quiet_since is None:
            self._quiet_since = now
        return self._quiet_since + self.limits.shutdown_linger

    def read_wait_ended(self, now: float) -> None:
        """The driver's wait for bytes gave up at a deadline it had from :meth:`read_deadline`:
        one that has really passed times the connection out (the next event is :class:`Close`);
        one that moved later since (the idle clock restarting after a message) is waited for
        again, so the driver need not move its deadline on every message."""
        if now >= self.read_deadline(now):
            self.read_timed_out()

    def read_timed_out(self) -> None:
        """No bytes came before ``read_deadline``: the next event is :class:`Close`."""
        if self.shutting_down:
            self._close(CloseReason.SHUTDOWN)
        elif self._decoder.has_partial_frame:
            late = DeadlineExceeded(
                "Request frame not complete within frame_timeout",
                {"limit": "frame_timeout", "frame_timeout_seconds": self.limits.frame_timeout},
            )
            self._close(CloseReason.FRAME_TIMEOUT, self.frame(encode_error(None, late)))
        else:
            self._close(CloseReason.IDLE)

    def discard_buffers(self) -> None:
        """Give back what is buffered for reading; the driver calls it once the connection ends."""
        self._decoder.discard()
        self.budget.release(self._charged)
        self._charged = 0

    def _close(self, reason: CloseReason, reply: bytes | None = None) -> Close:
        if self._closed is None:
            self._closed = Close(reason, reply)
            # Nothing more will be read: an unfinished frame's bytes are no use now.
            self.discard_buffers()
        return self._closed
