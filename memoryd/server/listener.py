"""The trio server: accept connections under a limit, run each, shut down gracefully.

It builds the policies from ``limits`` and hands them down: the RequestGuard (rpc/deadlines.py)
that every call runs under, the ConnectionLimits of each connection's protocol object
(rpc/connection.py), and the ServerStats that connections report to.  Nothing below calls back
up into it.

Shutdown: stop accepting; calls already running get ``shutdown_grace`` seconds to finish;
calls that arrive meanwhile are answered ShuttingDown; calls still running when the grace
period ends are cancelled and answered ShuttingDown.  No request goes unanswered.  A connection
with nothing running closes once its client has been quiet for ``shutdown_linger`` (a quarter
second), so idle clients never hold a stop for the grace period.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import socket
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
import trio

from memoryd.config import LimitsConfig
from memoryd.errors import Overloaded
from memoryd.log import fields
from memoryd.rpc.budget import SharedBudget
from memoryd.rpc.connection import ConnectionLimits
from memoryd.rpc.deadlines import RequestGuard
from memoryd.rpc.dispatch import MethodTable
from memoryd.rpc.envelope import encode_error
from memoryd.rpc.framing import detect_framing, encode_frame
from memoryd.server.admission import Admission, CallShares, Slot, Ticket
from memoryd.server.connection import Connection, peer_credentials
from memoryd.server.stats import ServerStats

log = logging.getLogger("memoryd.server")

#: After the grace period, how long cancelled calls get to send their ShuttingDown replies.
CANCELLED_REPLY_SECONDS = 1.0
#: Seconds a call refused past its uid's share is told to wait (error data ``retry_after``).
BUSY_RETRY_AFTER = 0.5
#: What a connection admitted into a health-probe slot may call.
PROBE_METHODS = frozenset({"system.health"})
#: The server's counts as system.health shows them, in this order, then "connections_by_uid".
_COUNT_NAMES = (
    "connections_open",
    "connections_total",
    "connections_rejected",
    "requests_total",
    "requests_in_flight",
    "connections_reserved",
    "oversized_messages",
    "stalled_connections",
    "frame_timeouts",
    "over_budget_connections",
    "buffered_bytes",
    "calls_refused_per_uid",
    "calls_cancelled_by_hangup",
)
_STATS_JSON = ("{" + "".join(f'"{name}":%d,' for name in _COUNT_NAMES) + '"connections_by_uid":%b}').encode()


#: The [limits] settings a connection enforces under the same names (max_inflight is
#: max_inflight_per_connection).
_CONNECTION_SETTINGS = ("max_message_bytes", "idle_timeout", "frame_timeout", "max_reply_bytes", "max_batch_calls")


class RpcServer:
    def __init__(
        self,
        table: MethodTable,
        limits: LimitsConfig,
        trusted_uids: Iterable[int] = (),
        method_timeouts: Mapping[str, float] | None = None,
    ) -> None:
        """``trusted_uids`` (auth.trusted_uids) are exempt from the per-uid share and may use the
        reserved slots; ``method_timeouts``: the methods given longer than limits.request_timeout."""
        self.limits = limits
        self.guard = RequestGuard(limits.request_timeout, method_timeouts)
        self.table = table.guarded_by(self.guard)
        self.connection_limits = ConnectionLimits(
            max_inflight=limits.max_inflight_per_connection,
            **{name: getattr(limits, name) for name in _CONNECTION_SETTINGS},
        )
        # A probe must ask at once: its slot is not held through idle_timeout.
        self.probe_limits = dataclasses.replace(self.connection_limits, idle_timeout=limits.frame_timeout)
        self.probe_table = self.table.restricted_to(
            PROBE_METHODS,
            Overloaded(data={"reason": "too many connections: only system.health is served on this one"}),
        )
        self.admission = Admission(
            max_connections=limits.max_connections,
            max_per_uid=limits.max_connections_per_uid,
            reserved=limits.reserved_connections,
            probes=limits.health_probe_connections,
            trusted_uids=trusted_uids,
        )
        self.call_shares = CallShares(limits.max_inflight_per_uid, trusted_uids)
        # A call past its uid's share is answered this without running (a batch: each call).
        self.busy_table = self.table.restricted_to(
            frozenset(),
            Overloaded(
                data={
                    "reason": "too many calls running for this peer",
                    "limit": "max_inflight_per_uid",
                    "retry_after": BUSY_RETRY_AFTER,
                }
            ),
        )
        self.budget = SharedBudget(limits.max_buffered_bytes)
        self.counters = ServerStats()
        self.connections: set[Connection] = set()
        self.shutting_down = False
        self.stopped = trio.Event()
        self._drained = trio.Event()
        self._accept_scope = trio.CancelScope()
        self._ids = itertools.count(1)
        # (connections_total when encoded, connections_by_uid as JSON): see stats_json.
        self._by_uid_json: tuple[int, bytes] = (-1, b"{}")

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = dict(zip(_COUNT_NAMES, self._counts(), strict=True))
        stats["connections_by_uid"] = {str(uid): count for uid, count in self.counters.connections_by_uid.items()}
        return stats

    def stats_json(self) -> bytes:
        """:meth:`stats` as JSON, the same bytes msgspec would write, built for system.health's
        every call: one format of the counts, and the per-uid part encoded again only when a
        connection was accepted (the one time it changes)."""
        accepted = self.counters.connections_total
        if self._by_uid_json[0] != accepted:
            by_uid = {str(uid): count for uid, count in self.counters.connections_by_uid.items()}
            self._by_uid_json = (accepted, msgspec.json.encode(by_uid))
        return _STATS_JSON % (*self._counts(), self._by_uid_json[1])

    def _counts(self) -> tuple[int, ...]:
        """The values of _COUNT_NAMES, in that order."""
        counters = self.counters
        return (
            len(self.connections),
            counters.connections_total,
            counters.connections_rejected,
            self.guard.requests_total,
            self.guard.in_flight,
            counters.connections_reserved,
            counters.oversized_messages,
            counters.stalled_connections,
            counters.frame_timeouts,
            counters.over_budget_connections,
            self.budget.used,
            self.call_shares.refused,
            counters.calls_cancelled_by_hangup,
        )

    async def serve(
        self,
        listen_socket: socket.socket,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until :meth:`shutdown`; returns once every connection is closed."""
        # listen() again only resizes the queue of pending connects (bind_socket_file and
        # systemd start with a smaller one): a connect burst then waits instead of failing EAGAIN.
        listen_socket.listen(self.limits.listen_backlog)
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(listen_socket))
        try:
            await self._serve(listener, task_status)
        finally:
            self.stopped.set()

    async def _serve(self, listener: trio.SocketListener, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            with self._accept_scope:
                while True:
                    stream = await listener.accept()
                    self._admit(stream, nursery)
            await listener.aclose()
            with trio.move_on_after(self.limits.shutdown_grace):
                await self._wait_drained()
            if self.connections:
                log.warning("shutdown.grace_expired", extra=fields(in_flight=self.guard.in_flight))
                self.guard.cancel_running()
                with trio.move_on_after(CANCELLED_REPLY_SECONDS):
                    await self._wait_drained()
                nursery.cancel_scope.cancel()

    def _admit(self, stream: trio.SocketStream, nursery: trio.Nursery) -> None:
        counters = self.counters
        _, uid, _ = peer_credentials(stream)
        ticket = self.admission.admit(uid)
        if ticket is None:
            counters.connections_rejected += 1
            nursery.start_soon(_refuse_overloaded, stream)
            return
        probe = ticket.slot is Slot.PROBE
        connection = Connection(
            stream,
            next(self._ids),
            self.probe_table if probe else self.table,
            self.probe_limits if probe else self.connection_limits,
            counters,
            self.budget,
            shares=None if probe else self.call_shares,
            busy_table=self.busy_table,
        )
        self.connections.add(connection)
        counters.connections_total += 1
        if ticket.slot is not Slot.REGULAR:
            counters.connections_reserved += 1
        if uid is not None:
            counters.connections_by_uid[uid] += 1
        nursery.start_soon(self._run_connection, connection, ticket)

    async def _wait_drained(self) -> None:
        if self.connections:
            await self._drained.wait()

    def shutdown(self) -> None:
        """Begin a graceful shutdown (idempotent)."""
        if self.shutting_down:
            return
        self.shutting_down = True
        self.guard.refuse_new_calls()
        self._accept_scope.cancel()
        for connection in list(self.connections):
            connection.begin_shutdown()
        if not self.connections:
            self._drained.set()

    async def _run_connection(self, connection: Connection, ticket: Ticket) -> None:
        try:
            await connection.run()
        finally:
            self.admission.release(ticket)
            self.connections.discard(connection)
            if self.shutting_down and not self.connections:
                self._drained.set()


async def _refuse_overloaded(stream: trio.SocketStream) -> None:
    """Answer Overloaded in the client's own framing, then close."""
    try:
        with trio.move_on_after(1.0):
            first = await stream.receive_some(1)
            error = encode_error(None, Overloaded(data={"reason": "too many connections"}))
            await stream.send_all(encode_frame(detect_framing(first or b"\n"), error))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await stream.aclose()
