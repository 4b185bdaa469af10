"""The trio server: accept connections under a limit, guard every call, shut down gracefully.

Shutdown: stop accepting; calls already running get ``shutdown_grace`` seconds to finish;
calls that arrive meanwhile are answered ShuttingDown; calls still running when the grace
period ends are cancelled and answered ShuttingDown.  No request goes unanswered.
"""

from __future__ import annotations

import itertools
import logging
import socket
from collections import Counter
from typing import Any

import trio

from memoryd.config import LimitsConfig
from memoryd.errors import DeadlineExceeded, Overloaded, ShuttingDown
from memoryd.log import fields
from memoryd.rpc.dispatch import CallContext, MethodTable
from memoryd.rpc.envelope import Request, encode_error
from memoryd.rpc.framing import FrameDecoder, Framing, encode_frame
from memoryd.server.connection import Connection

log = logging.getLogger("memoryd.server")


class GuardedTable:
    """The method table as the server runs it: deadline, shutdown refusal, cancellation on exit."""

    def __init__(self, inner: MethodTable, server: RpcServer) -> None:
        self.inner = inner
        self.server = server

    async def dispatch(self, request: Request, ctx: CallContext) -> bytes | None:
        server = self.server
        if server.shutting_down:
            return None if request.is_notification else encode_error(request.id, ShuttingDown())
        server.requests_total += 1
        scope = trio.CancelScope(deadline=trio.current_time() + server.limits.request_timeout)
        server.request_scopes.add(scope)
        try:
            with scope:
                return await self.inner.dispatch(request, ctx)
        finally:
            server.request_scopes.discard(scope)
        # Only reached when the scope was cancelled: deadline passed or grace period over.
        if request.is_notification:
            return None
        if server.grace_expired:
            return encode_error(request.id, ShuttingDown())
        log.warning("request.deadline", extra=fields(method=request.method, conn=ctx.connection_id))
        return encode_error(
            request.id,
            DeadlineExceeded(data={"timeout_seconds": server.limits.request_timeout}),
        )


class RpcServer:
    def __init__(self, table: MethodTable, limits: LimitsConfig) -> None:
        self.limits = limits
        self.guarded_table = GuardedTable(table, self)
        self.connections: set[Connection] = set()
        self.request_scopes: set[trio.CancelScope] = set()
        self.shutting_down = False
        self.grace_expired = False
        self.requests_total = 0
        self.connections_total = 0
        self.connections_rejected = 0
        self.oversized_messages = 0
        self.stalled_connections = 0
        self.connections_by_uid: Counter[int] = Counter()
        self.stopped = trio.Event()
        self._drained = trio.Event()
        self._accept_scope = trio.CancelScope()
        self._ids = itertools.count(1)

    def stats(self) -> dict[str, Any]:
        return {
            "connections_open": len(self.connections),
            "connections_total": self.connections_total,
            "connections_rejected": self.connections_rejected,
            "requests_total": self.requests_total,
            "requests_in_flight": len(self.request_scopes),
            "oversized_messages": self.oversized_messages,
            "stalled_connections": self.stalled_connections,
            "connections_by_uid": {str(uid): count for uid, count in self.connections_by_uid.items()},
        }

    async def serve(
        self,
        listen_socket: socket.socket,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until :meth:`shutdown`; returns once every connection is closed."""
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
                    if len(self.connections) >= self.limits.max_connections:
                        self.connections_rejected += 1
                        nursery.start_soon(_refuse_overloaded, stream, self.limits.max_message_bytes)
                        continue
                    connection = Connection(self, stream, next(self._ids))
                    self.connections.add(connection)
                    self.connections_total += 1
                    if connection.context.peer_uid is not None:
                        self.connections_by_uid[connection.context.peer_uid] += 1
                    nursery.start_soon(self._run_connection, connection)
            await listener.aclose()
            with trio.move_on_after(self.limits.shutdown_grace):
                await self._wait_drained()
            if self.connections:
                self.grace_expired = True
                log.warning("shutdown.grace_expired", extra=fields(in_flight=len(self.request_scopes)))
                for scope in list(self.request_scopes):
                    scope.cancel()
                with trio.move_on_after(1.0):
                    await self._wait_drained()
                nursery.cancel_scope.cancel()

    async def _wait_drained(self) -> None:
        if self.connections:
            await self._drained.wait()

    def shutdown(self) -> None:
        """Begin a graceful shutdown (idempotent)."""
        if self.shutting_down:
            return
        self.shutting_down = True
        self._accept_scope.cancel()
        for connection in list(self.connections):
            connection.begin_shutdown()
        if not self.connections:
            self._drained.set()

    async def _run_connection(self, connection: Connection) -> None:
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)
            if self.shutting_down and not self.connections:
                self._drained.set()


async def _refuse_overloaded(stream: trio.SocketStream, max_message_bytes: int) -> None:
    """Answer Overloaded in the client's own framing, then close."""
    try:
        with trio.move_on_after(1.0):
            first = await stream.receive_some(1)
            framing = FrameDecoder(max_message_bytes)
            framing.feed(first)
            error = encode_error(None, Overloaded(data={"reason": "too many connections"}))
            await stream.send_all(encode_frame(framing.framing or Framing.LINES, error))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await stream.aclose()
