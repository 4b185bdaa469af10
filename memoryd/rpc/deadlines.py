"""Where a request's deadline comes from: every call runs under ``RequestGuard.run``.

A call gets ``request_timeout`` seconds (``limits.request_timeout``), or its method's own
deadline when it has a longer one (a method that waits on an LLM), then it is cancelled and
answered DeadlineExceeded.  Once shutdown has begun, new calls are answered ShuttingDown without
running; calls still running when the grace period ends are cancelled and answered ShuttingDown.
Both are raised, not replied: they become replies where every error does (rpc/errormap.py).

The server owns the guard (it decides when shutdown begins and when the grace period is over);
the method table runs calls under it (``MethodTable.guarded_by``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import trio

from memoryd.errors import DeadlineExceeded, ShuttingDown
from memoryd.log import fields
from memoryd.rpc.context import NOT_NOW, CallContext
from memoryd.rpc.envelope import Request

__all__ = ["RequestGuard"]

log = logging.getLogger("memoryd.rpc")

T = TypeVar("T")


class RequestGuard:
    """Deadline and shutdown policy for calls, and the count of calls it let run."""

    def __init__(self, request_timeout: float, method_timeouts: Mapping[str, float] | None = None) -> None:
        """``method_timeouts``: methods that get longer than ``request_timeout`` (never shorter)."""
        if request_timeout <= 0:
            raise ValueError("request_timeout must be > 0")
        self.request_timeout = request_timeout
        self.method_timeouts = {
            method: timeout for method, timeout in (method_timeouts or {}).items() if timeout > request_timeout
        }
        self.refusing = False
        self.grace_expired = False
        self.requests_total = 0
        self._running: set[trio.CancelScope] = set()
        self._running_now = 0

    @property
    def in_flight(self) -> int:
        return len(self._running) + self._running_now

    async def run(self, call: Callable[[Request, CallContext], Awaitable[T]], request: Request, ctx: CallContext) -> T:
        """``await call(request, ctx)`` under the deadline; raises DeadlineExceeded or ShuttingDown."""
        if self.refusing:
            raise ShuttingDown()
        self.requests_total += 1
        timeout = self.method_timeouts.get(request.method, self.request_timeout)
        scope = trio.CancelScope(deadline=trio.current_time() + timeout)
        self._running.add(scope)
        try:
            with scope:
                return await call(request, ctx)
        finally:
            self._running.discard(scope)
        # Only reached when the scope was cancelled: its deadline passed, or the grace period ended.
        if self.grace_expired:
            raise ShuttingDown()
        log.warning("request.deadline", extra=fields(method=request.method, conn=ctx.connection_id))
        raise DeadlineExceeded(data={"timeout_seconds": timeout})

    def run_now(self, call: Callable[[Request, CallContext], Any], request: Request, ctx: CallContext) -> Any:
        """``call(request, ctx)``, synchronous, so no deadline applies (nothing can cancel it and
        it waits on nothing); refused during shutdown like :meth:`run`, before the method is
        looked up.  Counted as :meth:`run` counts, unless it said NOT_NOW: the :meth:`run` that
        follows counts that call."""
        if self.refusing:
            raise ShuttingDown()
        self._running_now += 1  # it is in flight while it runs, as a call under run() is
        answered = True
        try:
            result = call(request, ctx)
            answered = result is not NOT_NOW
            return result
        finally:
            self._running_now -= 1
            if answered:
                self.requests_total += 1

    def refuse_new_calls(self) -> None:
        """Shutdown has begun: calls that arrive from now on are answered ShuttingDown."""
        self.refusing = True

    def cancel_running(self) -> None:
        """The grace period is over: cancel every running call (each is answered ShuttingDown)."""
        self.refusing = True
        self.grace_expired = True
        for scope in list(self._running):
            scope.cancel()
