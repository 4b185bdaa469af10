"""Message framing on a byte stream, sans-io: split what arrives into JSON-RPC payloads.

Two framings share one socket type, chosen by the first byte a client sends: newline-delimited
JSON (handy for ``socat``/``nc`` and shell tools) or a 4-byte big-endian length prefix (handy
for clients that already hold whole messages).  A JSON text can only start with ``{``, ``[`` or
whitespace, while a length prefix starting with one of those bytes would announce a frame of
at least 150 MB, far beyond any sane ``max_message_bytes``; so the first byte is unambiguous.
"""

from __future__ import annotations

import enum
import struct

from memoryd.errors import PayloadTooLarge

__all__ = ["FrameDecoder", "Framing", "detect_framing", "encode_frame"]

# Bytes that make a connection line-framed: how a JSON text may begin.  Includes \v and \f
# (bytes.isspace() whitespace) so a stray one is not taken for a huge length prefix.
_LINE_START = frozenset(b"{[ \t\n\r\x0b\x0c")
_PREFIX = struct.Struct(">I")  # unpack_from reads the prefix in place: no slice per frame
_PREFIX_BYTES = _PREFIX.size


class Framing(enum.Enum):
    LINES = "lines"
    LENGTH_PREFIX = "length-prefix"


def detect_framing(first_bytes: bytes) -> Framing:
    """The framing a connection uses, from the first byte its client sent."""
    return Framing.LINES if first_bytes[0] in _LINE_START else Framing.LENGTH_PREFIX


class FrameDecoder:
    """Collects bytes with :meth:`feed` and hands out complete payloads with :meth:`next_message`.

    ``max_message_bytes`` caps one payload; :class:`PayloadTooLarge` is raised as soon as a
    frame is known to exceed it (before it is buffered in full), after which the connection
    is expected to close: the stream position is lost.
    """

    def __init__(self, max_message_bytes: int) -> None:
        if max_message_bytes < 1:
            raise ValueError("max_message_bytes must be >= 1")
        self.max_message_bytes = max_message_bytes
        self.framing: Framing | None = None
        self._buffer = bytearray()
        # LINES: how far the buffer has been searched for b"\n" without finding one, so each
        # byte is scanned once however the line arrives in pieces (h11's ReceiveBuffer idea).
        self._scanned = 0

    def feed(self, data: bytes) -> None:
        if not data:
            return
        if self.framing is None:
            self.framing = detect_framing(data)
        self._buffer += data

    def next_message(self) -> bytes | None:
        """One complete payload, or None when more bytes are needed."""
        if self.framing is Framing.LINES:
            return self._next_line()
        if self.framing is Framing.LENGTH_PREFIX:
            return self._next_prefixed()
        return None

    @property
    def has_partial_frame(self) -> bool:
        """True when buffered bytes hold the start of a frame not yet complete.

        Whitespace left over in line mode does not count: it would never become a message.
        """
        buffer = self._buffer
        if self.framing is Framing.LINES:
            # isspace() stops at the first other byte and copies nothing (strip() would copy).
            return bool(buffer) and not buffer.isspace()
        return bool(buffer)

    @property
    def buffered(self) -> int:
        """Bytes held: the unfinished frame, and complete ones not yet handed out."""
        return len(self._buffer)

    def discard(self) -> None:
        """Drop what is buffered (the connection is closing: nothing more will be read)."""
        self._buffer = bytearray()
        self._scanned = 0

    def end_of_input(self) -> bytes | None:
        """At EOF in line mode, the final line if the peer did not end it with a newline.

        Lets ``printf '{...}' | nc -U`` style clients work; in length-prefix mode a partial
        frame stays partial (None) and :attr:`has_partial_frame` tells the caller.
        """
        if self.framing is not Framing.LINES:
            return None
        line = bytes(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        line = line.strip()
        if not line:
            return None
        if len(line) > self.max_message_bytes:
            raise PayloadTooLarge(data={"max_message_bytes": self.max_message_bytes})
        return line

    def _next_line(self) -> bytes | None:
        buffer = self._buffer
        while True:
            end = buffer.find(b"\n", self._scanned)
            if end < 0:
                self._scanned = len(buffer)
                self._check_unterminated()
                return None
            line_end = end - 1 if end > 0 and buffer[end - 1] == 0x0D else end
            if line_end > self.max_message_bytes:
                raise PayloadTooLarge(data={"max_message_bytes": self.max_message_bytes})
            line = bytes(buffer[:line_end])
            # Deleting a bytearray's prefix is O(1) in CPython (it moves the start pointer).
            del buffer[: end + 1]
            self._scanned = 0
            if line.strip():
                return line
            # Whitespace-only lines (keep-alive newlines, blank lines) are skipped.

    def _check_unterminated(self) -> None:
        pending = len(self._buffer)
        if pending <= self.max_message_bytes:
            return
        # One byte of grace for a "\r" that will be stripped once the "\n" arrives.
        if pending == self.max_message_bytes + 1 and self._buffer[-1] == 0x0D:
            return
        raise PayloadTooLarge(data={"max_message_bytes": self.max_message_bytes})

    def _next_prefixed(self) -> bytes | None:
        buffer = self._buffer
        if len(buffer) < _PREFIX_BYTES:
            return None
        (length,) = _PREFIX.unpack_from(buffer)
        if length > self.max_message_bytes:
            raise PayloadTooLarge(data={"max_message_bytes": self.max_message_bytes})
        end = _PREFIX_BYTES + length
        if len(buffer) < end:
            return None
        payload = bytes(buffer[_PREFIX_BYTES:end])
        del buffer[:end]
        return payload


def encode_frame(framing: Framing, payload: bytes) -> bytes:
    """Frame one payload for sending.  JSON from msgspec never contains a raw newline."""
    if framing is Framing.LINES:
        return payload + b"\n"
    return _PREFIX.pack(len(payload)) + payload
