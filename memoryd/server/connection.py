"""One client connection: move bytes between the socket and the sans-io protocol.

Requests on one connection run concurrently (pipelining) up to ``max_inflight_per_connection``;
past that the connection stops reading, which pushes back on the client instead of queueing
without bound.  Replies go out as they complete and carry their request's id.
"""

from __future__ import annotations

import logging
import socket
import struct
from typing import TYPE_CHECKING

import trio

from memoryd.errors import PayloadTooLarge
from memoryd.log import fields
from memoryd.rpc.dispatch import CallContext, serve_message
from memoryd.rpc.envelope import encode_error
from memoryd.rpc.framing import FrameDecoder, Framing, encode_frame

if TYPE_CHECKING:
    from memoryd.server.listener import RpcServer

log = logging.getLogger("memoryd.server")

RECEIVE_CHUNK = 64 * 1024
#: During shutdown, how long a connection must stay quiet before it is closed.
SHUTDOWN_LINGER_SECONDS = 0.25
_PEERCRED = struct.Struct("3i")


def peer_credentials(stream: trio.SocketStream) -> tuple[int | None, int | None, int | None]:
    """(pid, uid, gid) of the process at the other end, from SO_PEERCRED."""
    try:
        raw = stream.socket.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except (OSError, AttributeError):
        return None, None, None
    pid, uid, gid = _PEERCRED.unpack(raw)
    return pid, uid, gid


async def acquire_fast(lock: trio.Lock | trio.Semaphore) -> None:
    """``await lock.acquire()`` minus its scheduler round when the lock is free.

    Every request takes the in-flight semaphore and the send lock, and each uncontended
    ``acquire()`` still yields to the scheduler: two extra trio passes per call, a fair share
    of a small call's cost (bench/run_all.py, rtt).  receive_some and send_all checkpoint
    anyway, so cancellation and fairness are unchanged.
    """
    try:
        lock.acquire_nowait()
    except trio.WouldBlock:
        await lock.acquire()


class Connection:
    def __init__(self, server: RpcServer, stream: trio.SocketStream, connection_id: int) -> None:
        self.server = server
        self.stream = stream
        limits = server.limits
        self.decoder = FrameDecoder(limits.max_message_bytes)
        self.inflight = trio.Semaphore(limits.max_inflight_per_connection)
        self.send_lock = trio.Lock()
        # The idle timer runs only while nothing is in flight; _start and _serve move it.
        self.idle_scope = trio.CancelScope()
        self.pending = 0
        pid, uid, gid = peer_credentials(stream)
        self.context = CallContext(peer_uid=uid, peer_pid=pid, peer_gid=gid, connection_id=connection_id)

    async def run(self) -> None:
        ctx = self.context
        log.debug(
            "connection.open",
            extra=fields(conn=ctx.connection_id, pid=ctx.peer_pid, uid=ctx.peer_uid, gid=ctx.peer_gid),
        )
        try:
            async with trio.open_nursery() as requests:
                await self._read_loop(requests)
                if self.server.shutting_down:
                    await self._answer_buffered_during_shutdown(requests)
        finally:
            with trio.CancelScope(shield=True):
                await self.stream.aclose()
            log.debug("connection.closed", extra=fields(conn=ctx.connection_id))

    def begin_shutdown(self) -> None:
        """Stop waiting for new requests once nothing is in flight; in-flight ones finish."""
        if self.pending == 0:
            self.idle_scope.cancel()

    async def _read_loop(self, requests: trio.Nursery) -> None:
        # Only the wait for bytes is ever cancelled (idle timeout, shutdown), never the
        # hand-off of a request that has been read: that would drop it without a reply.
        while not (self.server.shutting_down and self.pending == 0):
            self.idle_scope = trio.CancelScope(deadline=self._idle_deadline())
            with self.idle_scope:
                data = await self._receive()
            if self.idle_scope.cancelled_caught:
                if self.server.shutting_down:
                    return
                log.debug("connection.idle_timeout", extra=fields(conn=self.context.connection_id))
                return
            if not data:
                # EOF.  A last line without its newline still counts (`printf ... | nc -U`);
                # requests already read still get their replies.
                await self._dispatch_final_line(requests)
                return
            if not await self._dispatch_available(data, requests):
                return

    async def _receive(self) -> bytes:
        try:
            return await self.stream.receive_some(RECEIVE_CHUNK)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return b""

    async def _dispatch_available(self, data: bytes, requests: trio.Nursery) -> bool:
        """Start a task per complete message; False when the connection must close."""
        self.decoder.feed(data)
        while True:
            try:
                payload = self.decoder.next_message()
            except PayloadTooLarge as exc:
                # The rest of the stream cannot be framed any more: answer, then close.
                self.server.oversized_messages += 1
                await self._send(encode_error(None, exc))
                return False
            if payload is None:
                return True
            await self._start(payload, requests)

    async def _dispatch_final_line(self, requests: trio.Nursery) -> None:
        try:
            payload = self.decoder.end_of_input()
        except PayloadTooLarge as exc:
            self.server.oversized_messages += 1
            await self._send(encode_error(None, exc))
            return
        if payload:
            await self._start(payload, requests)

    def _idle_deadline(self) -> float:
        if self.pending:
            return float("inf")
        return trio.current_time() + self.server.limits.idle_timeout

    async def _start(self, payload: bytes, requests: trio.Nursery) -> None:
        await acquire_fast(self.inflight)  # backpressure: stop reading while too many are running
        self.pending += 1
        self.idle_scope.deadline = float("inf")
        requests.start_soon(self._serve, payload)

    async def _serve(self, payload: bytes) -> None:
        try:
            reply = await serve_message(payload, self.server.guarded_table, self.context)
            if reply is not None:
                await self._send(reply)
        finally:
            self.pending -= 1
            self.inflight.release()
            self.idle_scope.deadline = self._idle_deadline()
            if self.server.shutting_down and self.pending == 0:
                self.idle_scope.cancel()

    async def _answer_buffered_during_shutdown(self, requests: trio.Nursery) -> None:
        # A client may have a request on the wire as we stop reading (it sent it the moment its
        # last reply arrived).  Keep answering ShuttingDown until the client goes quiet or away,
        # so no request is dropped without a reply.
        while True:
            with trio.move_on_after(SHUTDOWN_LINGER_SECONDS):
                data = await self._receive()
                if data and await self._dispatch_available(data, requests):
                    continue
            return

    async def _send(self, payload: bytes) -> None:
        framing = self.decoder.framing or Framing.LINES
        await acquire_fast(self.send_lock)
        try:
            # A client that stops reading its replies must not pin a connection (and its
            # in-flight slots) forever: a send that makes no progress for idle_timeout ends it.
            with trio.move_on_after(self.server.limits.idle_timeout) as stalled:
                await self.stream.send_all(encode_frame(framing, payload))
            if stalled.cancelled_caught:
                log.info("connection.send_stalled", extra=fields(conn=self.context.connection_id))
                self.server.stalled_connections += 1
                await self.stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The client went away; its requests' results have nowhere to go.
            log.debug("connection.send_failed", extra=fields(conn=self.context.connection_id))
        finally:
            self.send_lock.release()
