"""One client connection under trio: move bytes between the socket and ``RpcConnection``.

What to do next is always the protocol object's answer (memoryd/rpc/connection.py); this loop
only receives, answers or starts a task per message, and sends.  A call that can be answered
without waiting (``rpc.dispatch.answer_now``: health with its numbers cached, any call refused
before it runs) is answered right here in the read loop; every other message gets its own task,
so messages on one connection run concurrently (pipelining) up to ``max_inflight``, past which
the loop stops reading, pushing back on the client instead of queueing without bound; and up to
the peer uid's share over all its connections (``CallShares``), past which a message is answered
-32003 with ``retry_after`` without running.  Replies go out as they complete, carrying their
request's id.

A client that hangs up takes its calls with it: while any run, the socket is checked for the
peer's close (POLLHUP: both directions shut, which a half-close that still waits for replies
is not) every ``HANGUP_CHECK_SECONDS`` and at end of input, and then every queued and running
call of the connection is cancelled.  Work a call already committed stays committed; work in a
worker thread finishes (SQLite is never interrupted half way), and nothing is sent.

The socket is driven with ``trio.lowlevel.wait_readable`` and plain ``read``/``write`` calls
rather than ``SocketStream.receive_some``/``send_all``: trio's calls add a scheduler pass each
even when the system call succeeds at once, and a cancel scope per wait costs as much again
(bench/bench_rtt.py measures both).  A read is tried after one scheduler pass and waits for
readability only when nothing came (``_receive``); replies are written by ``reply_writer.py``.
The read deadline (idle, frame, shutdown) lives in one cancel scope that is replaced only when
it fires or must move earlier.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import struct

import trio

from memoryd.log import fields
from memoryd.rpc.budget import SharedBudget
from memoryd.rpc.connection import Close, CloseReason, ConnectionLimits, RpcConnection, Wait
from memoryd.rpc.dispatch import NOT_NOW, CallContext, MethodTable, answer_now, serve_message
from memoryd.server.admission import CallShares
from memoryd.server.reply_writer import ReplyWriter
from memoryd.server.stats import ServerStats

log = logging.getLogger("memoryd.server")

RECEIVE_CHUNK = 64 * 1024
#: How often a connection with calls running looks for its peer's hang-up.
HANGUP_CHECK_SECONDS = 0.05
_PEERCRED = struct.Struct("3i")


def peer_credentials(stream: trio.SocketStream) -> tuple[int | None, int | None, int | None]:
    """(pid, uid, gid) of the process at the other end, from SO_PEERCRED."""
    try:
        raw = stream.socket.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except (OSError, AttributeError):
        return None, None, None
    pid, uid, gid = _PEERCRED.unpack(raw)
    return pid, uid, gid


class Connection:
    def __init__(
        self,
        stream: trio.SocketStream,
        connection_id: int,
        table: MethodTable,
        limits: ConnectionLimits,
        stats: ServerStats,
        budget: SharedBudget | None = None,
        *,
        shares: CallShares | None = None,
        busy_table: MethodTable | None = None,
    ) -> None:
        self.stream = stream
        self.shares = shares
        self.busy_table = busy_table
        self._messages: trio.Nursery | None = None
        #: Set when no message is running: the hang-up watcher's cue to stop.
        self._calm = trio.Event()
        self._watching = False
        self.table = table
        self.stats = stats
        self.protocol = RpcConnection(limits, budget)
        self._slot_freed = trio.lowlevel.ParkingLot()
        # The scope every wait for bytes runs in.  Its deadline is never later than the
        # protocol's read deadline; when it fires the loop asks the protocol again, so a deadline
        # that moved later (the idle clock restarting after every message) costs nothing per call.
        self._read_scope = trio.CancelScope()
        pid, uid, gid = peer_credentials(stream)
        self.context = CallContext(peer_uid=uid, peer_pid=pid, peer_gid=gid, connection_id=connection_id)
        self.writer = ReplyWriter(stream, self.protocol, stats, connection_id)

    async def run(self) -> None:
        ctx = self.context
        log.debug(
            "connection.open",
            extra=fields(conn=ctx.connection_id, pid=ctx.peer_pid, uid=ctx.peer_uid, gid=ctx.peer_gid),
        )
        try:
            # Leaving the nursery waits for the messages still running: each gets its reply.
            async with trio.open_nursery() as messages:
                self._messages = messages
                await self._read_messages(messages)
        finally:
            self.protocol.discard_buffers()
            with trio.CancelScope(shield=True):
                await self.stream.aclose()
            log.debug("connection.closed", extra=fields(conn=ctx.connection_id))

    def begin_shutdown(self) -> None:
        """Keep answering until the client is quiet; running messages finish."""
        self.protocol.begin_shutdown()
        self._lower_read_deadline()

    async def _read_messages(self, messages: trio.Nursery) -> None:
        protocol = self.protocol
        while True:
            self._read_scope = trio.CancelScope(deadline=protocol.read_deadline(trio.current_time()))
            close = None
            with self._read_scope:
                close = await self._serve_until_closed(messages)
            if close is not None:
                await self._close(close)
                return
            # The scope fired: a deadline that has really passed ends the connection (the next
            # event is Close); one that moved later since is waited for in a new scope.
            protocol.read_wait_ended(trio.current_time())

    async def _serve_until_closed(self, messages: trio.Nursery) -> Close | None:
        """Run the protocol's events until it says Close.  Every await here may be cancelled by
        the read deadline without losing anything: a message once read is handed off (answered,
        or its task started) before the next await."""
        protocol = self.protocol
        while True:
            event = protocol.next_event()
            if type(event) is bytes:
                self._hand_off(event, messages)
            elif event is Wait.NEED_DATA:
                self._lower_read_deadline()
                await self._receive()
            elif event is Wait.SLOT:
                await self._slot_freed.park()
            else:
                assert isinstance(event, Close)
                return event

    def _hand_off(self, payload: bytes, messages: trio.Nursery) -> None:
        protocol = self.protocol
        reply = answer_now(payload, self.table, self.context, budget=protocol.replies)
        if reply is NOT_NOW:
            if self.shares is None or self.shares.take(self.context.peer_uid):
                self._watch_for_hangup(messages)
                messages.start_soon(self._serve, payload, self.shares)
                return
            assert self.busy_table is not None
            reply = answer_now(payload, self.busy_table, self.context, budget=protocol.replies)
            if reply is NOT_NOW:  # a batch: each of its calls is refused, in a task
                messages.start_soon(self._serve, payload, None, self.busy_table)
                return
        protocol.message_done()
        if reply is not None:
            self.writer.send_now(protocol.frame(reply), len(reply), messages)

    def _lower_read_deadline(self) -> None:
        deadline = self.protocol.read_deadline(trio.current_time())
        if deadline < self._read_scope.deadline:
            self._read_scope.deadline = deadline

    async def _receive(self) -> None:
        sock = self.stream.socket
        try:
            # One scheduler pass before every read, whether or not bytes are waiting: the
            # checkpoint that keeps a client that never stops sending from starving the others.
            # The read is tried after that pass, before waiting for readability (as trio's own
            # receive_some does): a client that sends its next request right after our reply
            # usually has it here by then, and the loop goes on without sleeping in epoll.  A
            # sleep costs a wake-up from the other core (an interrupt, and on a virtual machine
            # an exit to the host), tens of microseconds when the client runs on the other core
            # (bench/bench_rtt.py --placement measures it).
            await trio.lowlevel.checkpoint()
            try:
                data = os.read(sock.fileno(), RECEIVE_CHUNK)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(sock)
                data = os.read(sock.fileno(), RECEIVE_CHUNK)
        except BlockingIOError:
            return  # woken without bytes after all: the loop asks for them again
        except (trio.ClosedResourceError, OSError):
            data = b""  # closed here (a stalled send) or reset by the peer: end of input
        self.protocol.receive_data(data)

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
        if reason is CloseReason.END_OF_INPUT and self.protocol.in_flight and self._messages is not None:
            # A half-close still waits for its replies; a hang-up wants nothing more.
            if self._peer_hung_up():
                self._cancel_for_hangup(self._messages)
        if event.reply is not None:
            await self.writer.send(event.reply)

    def _watch_for_hangup(self, messages: trio.Nursery) -> None:
        if not self._watching:
            self._watching = True
            self._calm = trio.Event()
            messages.start_soon(self._watch_hangup, messages)

    async def _watch_hangup(self, messages: trio.Nursery) -> None:
        """While calls run: cancel them all once the peer has closed its end."""
        try:
            while self.protocol.in_flight:
                if self._calm.is_set():
                    # Calm came and went (a new call arrived before this task woke): wait for
                    # the next one, or this loop would spin while the new calls run.
                    self._calm = trio.Event()
                with trio.move_on_after(HANGUP_CHECK_SECONDS):
                    await self._calm.wait()
                if self.protocol.in_flight and self._peer_hung_up():
                    self._cancel_for_hangup(messages)
                    return
        finally:
            self._watching = False

    def _peer_hung_up(self) -> bool:
        try:
            poller = select.poll()
            poller.register(self.stream.socket.fileno(), select.POLLHUP | select.POLLERR)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True  # closed here already

    def _cancel_for_hangup(self, messages: trio.Nursery) -> None:
        running = self.protocol.in_flight
        self.stats.calls_cancelled_by_hangup += running
        log.debug("connection.hung_up", extra=fields(conn=self.context.connection_id, cancelled=running))
        messages.cancel_scope.cancel()

    async def _serve(self, payload: bytes, shares: CallShares | None = None, table: MethodTable | None = None) -> None:
        protocol = self.protocol
        reply = None
        try:
            # One scheduler pass before the call starts, and a look at the socket (a poll costs
            # a microsecond; these calls cost a worker thread's time): calls sent just before a
            # hang-up are cancelled before any of them reaches a worker thread, where it could no
            # longer be stopped.
            await trio.lowlevel.checkpoint()
            if self._messages is not None and self._peer_hung_up():
                self._cancel_for_hangup(self._messages)
                await trio.lowlevel.checkpoint()  # raises Cancelled
            reply = await serve_message(
                payload,
                table or self.table,
                self.context,
                budget=protocol.replies,
                max_batch_calls=protocol.limits.max_batch_calls,
            )
            if reply is not None:
                await self.writer.send(protocol.frame(reply))
        finally:
            if reply is not None:
                protocol.replies.release(len(reply))
            if shares is not None:
                shares.give_back(self.context.peer_uid)
            protocol.message_done()
            if self._slot_freed:
                self._slot_freed.unpark_all()
            if not protocol.in_flight:
                self._calm.set()
                self._lower_read_deadline()
