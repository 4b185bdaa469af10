"""Writing one connection's replies: at once when the socket buffer takes them whole, else the
rest in a task, one reply at a time, given up on when the peer stops reading.

Plain ``write`` calls rather than ``SocketStream.send_all``: trio's call adds a scheduler pass
even when the system call succeeds at once (bench/bench_rtt.py measures it).  A reply that fits
the socket buffer is written at once; only the rest of one that does not waits, in a task, under
the send semaphore and the stall timeout.
"""

from __future__ import annotations

import logging
import os

import trio

from memoryd.log import fields
from memoryd.rpc.connection import RpcConnection
from memoryd.server.stats import ServerStats

log = logging.getLogger("memoryd.server")


class ReplyWriter:
    """Sends the framed replies of one connection on ``stream``."""

    def __init__(
        self, stream: trio.SocketStream, protocol: RpcConnection, stats: ServerStats, connection_id: int
    ) -> None:
        self.stream = stream
        self.protocol = protocol
        self.stats = stats
        self.connection_id = connection_id
        # Held while a reply is being sent in pieces (a semaphore, not a Lock: the read loop may
        # take it after writing part of a reply and the task that sends the rest releases it).
        self._sending = trio.Semaphore(1)

    def send_now(self, frame: bytes, charged: int, messages: trio.Nursery) -> None:
        """Write ``frame`` if the socket takes it whole; otherwise a task sends the rest.  The
        ``charged`` reply bytes are released once it is all sent (or the peer is gone)."""
        sent = self._start_send(frame)
        if sent == len(frame):
            self.protocol.replies.release(charged)
            return
        messages.start_soon(self._send_rest, frame, sent, charged)

    async def send(self, frame: bytes) -> None:
        """Send all of ``frame`` (unless the peer is gone or stops reading)."""
        await self._finish_send(frame, self._start_send(frame))

    async def _send_rest(self, frame: bytes, sent: int, charged: int) -> None:
        try:
            await self._finish_send(frame, sent)
        finally:
            self.protocol.replies.release(charged)

    def _write_nowait(self, frame: bytes | memoryview) -> int:
        """Bytes of ``frame`` the socket took without waiting; 0 while another reply is being
        sent in pieces (its bytes must not be interleaved with these) or the socket is full or
        gone."""
        if not self._sending.value:
            return 0
        try:
            return os.write(self.stream.socket.fileno(), frame)
        except OSError:
            # Full (EAGAIN), or closed or broken: the awaited send sees it and says so.
            return 0

    def _start_send(self, frame: bytes) -> int:
        """Write what the socket takes now; bytes sent.  When only part is out, nothing else may
        write until the rest is: the send lock is taken here, at once, and released by
        :meth:`_finish_send`."""
        sent = self._write_nowait(frame)
        if 0 < sent < len(frame):
            self._sending.acquire_nowait()
        return sent

    async def _finish_send(self, frame: bytes, sent: int) -> None:
        """The rest of a frame :meth:`_start_send` began."""
        if sent == len(frame):
            return
        if not sent:
            await self._acquire_sending()
        await self._send_held(memoryview(frame)[sent:])

    async def _acquire_sending(self) -> None:
        # An uncontended trio acquire() still yields to the scheduler: a pass per reply saved.
        try:
            self._sending.acquire_nowait()
        except trio.WouldBlock:
            await self._sending.acquire()

    async def _send_held(self, rest: memoryview) -> None:
        """Send ``rest`` of a reply while holding ``_sending``, and release it."""
        try:
            # A client that stops reading its replies must not pin a connection (and its
            # in-flight slots) forever: a send that makes no progress for idle_timeout ends it.
            with trio.move_on_after(self.protocol.limits.idle_timeout) as stalled:
                await self.stream.send_all(rest)
            if stalled.cancelled_caught:
                log.info("connection.send_stalled", extra=fields(conn=self.connection_id))
                self.stats.stalled_connections += 1
                # Read nothing more: what the client has queued would be run for nobody.
                self.protocol.send_stalled()
                await self.stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The client went away; its messages' results have nowhere to go.
            log.debug("connection.send_failed", extra=fields(conn=self.connection_id))
        finally:
            self._sending.release()
