"""The start-up integrity check: SQLite's quick_check of the whole file, in a worker thread.

It starts as soon as the store is open and runs while the embedder loads.  Start-up waits for
it at most ``storage.integrity_check_wait`` seconds: a store found damaged by then is not
served (``StoreRefused``); a larger store is served meanwhile and the check finishes in the
background, where damage turns health ``degraded`` and stops writes (the store's condition).
quick_check reads every page: about 0.8 s for 100k memories (214 MB) on the reference machine.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import trio

from memoryd.log import fields
from memoryd.store import Lifecycle

log = logging.getLogger("memoryd.daemon")


class IntegrityCheck:
    def __init__(self, lifecycle: Lifecycle) -> None:
        self._lifecycle = lifecycle
        self._lock = threading.Lock()
        self._interrupt: Callable[[], None] | None = None
        self._stopping = False
        #: ["ok"], the problems found, or None (not finished, or interrupted).
        self.verdict: list[str] | None = None
        self.done = trio.Event()

    @property
    def damaged(self) -> bool:
        return self.verdict is not None and self.verdict != ["ok"]

    def start(self) -> None:
        """Start the check in a thread of its own; the caller must ``stop`` and await ``done``
        before closing the store (the daemon does, in its finally)."""
        token = trio.lowlevel.current_trio_token()
        started = time.perf_counter()

        def deliver(result: Any) -> None:  # an outcome.Outcome, in the worker thread
            token.run_sync_soon(self._finish, result, started)

        trio.lowlevel.start_thread_soon(lambda: self._lifecycle.quick_check(self._started), deliver)

    def _finish(self, result: Any, started: float) -> None:
        with self._lock:
            self._interrupt = None  # its connection is closed
        try:
            self.verdict = result.unwrap()
        except Exception:
            log.exception("store.integrity_check_failed")
        self.done.set()
        seconds = round(time.perf_counter() - started, 3)
        if self.verdict == ["ok"]:
            log.info("store.integrity_ok", extra=fields(check="quick_check", seconds=seconds))
        elif self.verdict is None:
            log.info("store.integrity_check_stopped", extra=fields(seconds=seconds))
        # Damage was logged by the store's condition, which also stopped the writes.

    def stop(self) -> None:
        """Interrupt a running check (shutdown); safe to call at any time, more than once."""
        with self._lock:
            self._stopping = True
            interrupt = self._interrupt
        if interrupt is not None:
            interrupt()

    def _started(self, interrupt: Callable[[], None]) -> None:
        # Called in the worker thread, on the check's connection, before the check runs.
        with self._lock:
            self._interrupt = interrupt
            stopping = self._stopping
        if stopping:
            interrupt()
