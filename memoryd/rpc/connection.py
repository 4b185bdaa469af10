"""One connection's protocol state, without I/O (h11's ``Connection`` is the model).

A driver (server/connection.py) feeds what it receives to :meth:`RpcConnection.receive_data`,
asks :meth:`RpcConnection.next_event` what to do, runs each message it is handed, frames the
reply with :meth:`RpcConnection.frame` and reports it with :meth:`RpcConnection.message_done`.
Everything that decides what happens on a connection lives here and is tested without sockets:
the framing (chosen by the first byte), how many messages run at once, how long to wait for
bytes (idle, shutdown linger), the -32004 reply and close after an oversized frame, and a last
line without its newline at end of input.

Limits are constructor arguments (:class:`ConnectionLimits`).  The per-connection bounds still
to come belong here too: a deadline for finishing a frame once started (``read_deadline``), a
bound on the bytes buffered (``receive_data``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from memoryd.errors import PayloadTooLarge
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

    def __post_init__(self) -> None:
        if self.max_message_bytes < 1 or self.max_inflight < 1:
            raise ValueError("max_message_bytes and max_inflight must be >= 1")
        if self.idle_timeout <= 0 or self.shutdown_linger <= 0:
            raise ValueError("idle_timeout and shutdown_linger must be > 0")


class Wait(enum.Enum):
    """What the driver waits for before asking :meth:`RpcConnection.next_event` again."""

    #: Bytes: receive some and pass them (b"" at end of input) to ``receive_data``, giving up at
    #: ``read_deadline`` (then ``read_timed_out``).
    NEED_DATA = "need-data"
    #: A running message to finish (``message_done``): ``max_inflight`` are running.
    SLOT = "slot"


class CloseReason(enum.Enum):
    END_OF_INPUT = "end-of-input"
    IDLE = "idle"
    SHUTDOWN = "shutdown"
    TOO_LARGE = "too-large"
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

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.in_flight = 0
        self.shutting_down = False
        self._decoder = FrameDecoder(limits.max_message_bytes)
        self._end_of_input = False
        self._closed: Close | None = None

    @property
    def framing(self) -> Framing | None:
        """None until the first byte has arrived."""
        return self._decoder.framing

    def receive_data(self, data: bytes) -> None:
        """Bytes from the peer; ``b""`` means end of input."""
        if data:
            self._decoder.feed(data)
        else:
            self._end_of_input = True

    def next_event(self) -> bytes | Wait | Close:
        """A message to run (its payload), something to wait for, or :class:`Close`.

        Once a Close is returned it is returned again on every later call.
        """
        if self._closed is not None:
            return self._closed
        if self.in_flight >= self.limits.max_inflight:
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
        if payload is None:
            return Wait.NEED_DATA
        self.in_flight += 1
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

    def read_deadline(self, now: float) -> float:
        """When to stop waiting for bytes (then call :meth:`read_timed_out`); ``inf``: never.

        Only an idle connection times out: while a message runs, its deadline is the method
        table's business.  The driver asks again whenever ``in_flight`` drops or shutdown begins.
        """
        if self.in_flight:
            return math.inf
        if self.shutting_down:
            return now + self.limits.shutdown_linger
        return now + self.limits.idle_timeout

    def read_timed_out(self) -> None:
        """No bytes came before ``read_deadline``: the next event is :class:`Close`."""
        self._close(CloseReason.SHUTDOWN if self.shutting_down else CloseReason.IDLE)

    def _close(self, reason: CloseReason, reply: bytes | None = None) -> Close:
        if self._closed is None:
            self._closed = Close(reason, reply)
        return self._closed
