"""One client connection under trio: move bytes between the socket and ``RpcConnection``.

What to do next is always the protocol object's answer (memoryd/rpc/connection.py); this loop
only receives, starts a task per message, and sends.  Messages on one connection run
concurrently (pipelining) up to ``max_inflight``, past which it stops reading, pushing back on
the client instead of queueing without bound.  Replies go out as they complete, carrying their
request's id.
"""

from __future__ import annotations

import logging
import socket
import struct

import trio

from memoryd.log import fields
from memoryd.rpc.budget import SharedBudget
from memoryd.rpc.connection import Close, CloseReason, ConnectionLimits, RpcConnection, Wait
from memoryd.rpc.dispatch import CallContext, MethodTable, serve_message
from memoryd.server.stats import ServerStats

log = logging.getLogger("memoryd.server")

RECEIVE_CHUNK = 64 * 1024
_PEERCRED = struct.Struct("3i")


def peer_credentials(stream: trio.SocketStream) -> tuple[int | None, int | None, int | None]:
    """(pid, uid, gid) of the process at the other end, from SO_PEERCRED."""
    try:
        raw = stream.socket.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except (OSError, AttributeError):
        return None, None, None
    pid, uid, gid = _PEERCRED.unpack(raw)
    return pid, uid, gid


async def acquire_fast(lock: trio.Lock) -> None:
    """``await lock.acquire()`` minus its scheduler round when the lock is free.

    Every reply takes the send lock, and an uncontended ``acquire()`` still yields to the
    scheduler: an extra trio pass per call, a fair share of a small call's cost
    (bench/run_all.py, rtt).  send_all checkpoints anyway, so cancellation and fairness are
    unchanged.
    """
    try:
        lock.acquire_nowait()
    except trio.WouldBlock:
        await lock.acquire()


class Connection:
    def __init__(
        self,
        stream: trio.SocketStream,
        connection_id: int,
        table: MethodTable,
        limits: ConnectionLimits,
        stats: ServerStats,
        budget: SharedBudget | None = None,
    ) -> None:
        self.stream = stream
        self.table = table
        self.stats = stats
        self.protocol = RpcConnection(limits, budget)
        self._send_lock = trio.Lock()
        self._slot_freed = trio.lowlevel.ParkingLot()
        # The scope of the current wait for bytes: its deadline moves when the protocol's does.
        self._read_scope = trio.CancelScope()
        pid, uid, gid = peer_credentials(stream)
        self.context = CallContext(peer_uid=uid, peer_pid=pid, peer_gid=gid, connection_id=connection_id)

    async def run(self) -> None:
        ctx = self.context
        log.debug(
            "connection.open",
            extra=fields(conn=ctx.connection_id, pid=ctx.peer_pid, uid=ctx.peer_uid, gid=ctx.peer_gid),
        )
        try:
            # Leaving the nursery waits for the messages still running: each gets its reply.
            async with trio.open_nursery() as messages:
                await self._read_messages(messages)
        finally:
            self.protocol.discard_buffers()
            with trio.CancelScope(shield=True):
                await self.stream.aclose()
            log.debug("connection.closed", extra=fields(conn=ctx.connection_id))

    def begin_shutdown(self) -> None:
        """Keep answering until the client is quiet; running messages finish."""
        self.protocol.begin_shutdown()
        self._read_scope.deadline = self.protocol.read_deadline(trio.current_time())

    async def _read_messages(self, messages: trio.Nursery) -> None:
        protocol = self.protocol
        while True:
            event = protocol.next_event()
            if type(event) is bytes:
                messages.start_soon(self._serve, event)
            elif event is Wait.NEED_DATA:
                await self._receive()
            elif event is Wait.SLOT:
                await self._slot_freed.park()
            else:
                assert isinstance(event, Close)
                await self._close(event)
                return

    async def _receive(self) -> None:
        # Only this wait for bytes is ever cancelled (idle, shutdown), never the hand-off of a
        # message that has been read: that would drop it without a reply.
        self._read_scope = trio.CancelScope(deadline=self.protocol.read_deadline(trio.current_time()))
        with self._read_scope:
            try:
                data = await self.stream.receive_some(RECEIVE_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            self.protocol.receive_data(data)
            return
        self.protocol.read_timed_out()

    async def _close(self, event: Close) -> None:
        reason = event.reason
        if reason is CloseReason.TOO_LARGE:
            self.stats.oversized_messages += 1
        elif reason is CloseReason.FRAME_TIMEOUT:
            self.stats.frame_timeouts += 1
        elif reason is CloseReason.OVER_BUDGET:
            self.stats.over_budget_connections += 1
        elif reason is CloseReason.IDLE:
            log.debug("connection.idle_timeout", extra=fields(conn=self.context.connection_id))
        if event.reply is not None:
            await self._send(event.reply)

    async def _serve(self, payload: bytes) -> None:
        protocol = self.protocol
        reply = None
        try:
            reply = await serve_message(
                payload,
                self.table,
                self.context,
                budget=protocol.replies,
                max_batch_calls=protocol.limits.max_batch_calls,
            )
            if reply is not None:
                await self._send(protocol.frame(reply))
        finally:
            if reply is not None:
                protocol.replies.release(len(reply))
            protocol.message_done()
            if self._slot_freed:
                self._slot_freed.unpark_all()
            if not protocol.in_flight:
                self._read_scope.deadline = protocol.read_deadline(trio.current_time())

    async def _send(self, frame: bytes) -> None:
        await acquire_fast(self._send_lock)
        try:
            # A client that stops reading its replies must not pin a connection (and its
            # in-flight slots) forever: a send that makes no progress for idle_timeout ends it.
            with trio.move_on_after(self.protocol.limits.idle_timeout) as stalled:
                await self.stream.send_all(frame)
            if stalled.cancelled_caught:
                log.info("connection.send_stalled", extra=fields(conn=self.context.connection_id))
                self.stats.stalled_connections += 1
                # Read nothing more: what the client has queued would be run for nobody.
                self.protocol.send_stalled()
                await self.stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The client went away; its messages' results have nowhere to go.
            log.debug("connection.send_failed", extra=fields(conn=self.context.connection_id))
        finally:
            self._send_lock.release()
