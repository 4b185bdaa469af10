"""The start-up integrity check: SQLite's quick_check of the whole file, in a thread of its own.

It starts before the daemon's modules are even imported (``head_start.py``) when the file
exists and is in WAL mode (its read snapshot then never blocks the store's opening), else once
the store is open.  Start-up waits for it at most ``storage.integrity_check_wait`` seconds after
it began: a store found damaged by then is not served (``StoreRefused``); a larger store is
served meanwhile and the check finishes in the background, where damage turns health
``degraded`` and stops writes (the daemon hands the verdict to the store's condition).
quick_check reads every page: about 0.8 s for 100k memories (214 MB) on the reference machine.

Its read snapshot may be open while the store migrates the file: fine in WAL mode for the
migrations' ordinary write transactions; a migration that needs the file to itself (VACUUM,
a journal_mode change) would wait for the check, up to the busy timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from memoryd.errors import StoreError
from memoryd.log import fields
from memoryd.store.sqlite.db.quick_check import is_wal_database, quick_check_file

log = logging.getLogger("memoryd.daemon")


class IntegrityCheck:
    def __init__(self, db_path: Path, *, busy_timeout_ms: int) -> None:
        """Starts checking at once if the file can be read before the store opens; else
        :meth:`store_opened` starts it.  No trio needed: this runs before trio does."""
        self._path = db_path
        self._busy_timeout_ms = busy_timeout_ms
        self._lock = threading.Lock()
        self._interrupt: Callable[[], None] | None = None
        self._stopping = False
        self._finished = threading.Event()
        self._opened = threading.Event()
        self._on_damage: Callable[[str], None] | None = None
        #: perf_counter() when the check began and when it ended, None before.
        self.started_at: float | None = None
        self.finished_at: float | None = None
        #: ["ok"], the problems found, or None (not finished, interrupted, or not readable).
        self.verdict: list[str] | None = None
        self._thread: threading.Thread | None = None
        if is_wal_database(db_path):
            self._begin(retry_after_open=True)

    @property
    def damaged(self) -> bool:
        return self.verdict is not None and self.verdict != ["ok"]

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    def damage_found_within(self, seconds: float) -> bool:
        """Damage found at most ``seconds`` after the check began: what start-up refuses.
        (With a wait of 0 a store is served while checked, even when the check is quick.)"""
        if not self.damaged or self.started_at is None or self.finished_at is None:
            return False
        return self.finished_at - self.started_at <= seconds

    def store_opened(self, on_damage: Callable[[str], None]) -> None:
        """The store is open (the file exists, in WAL mode): start now if not started yet, or
        let a first attempt that could not read the file try again.  ``on_damage(problems)``
        is called once if the check finds damage, whenever it does (thread-safe: the store's
        condition, which stops writes and turns health degraded)."""
        with self._lock:
            self._on_damage = on_damage
            # Finished already: hand it over here; else the check does as it finishes.
            found = self._finished.is_set() and self.damaged
        if found:
            on_damage(self.problems)
        self._opened.set()
        if self._thread is None:
            self._begin(retry_after_open=False)

    @property
    def problems(self) -> str:
        """The first problems found, on one line."""
        return "; ".join((self.verdict or [])[:3])

    def _begin(self, *, retry_after_open: bool) -> None:
        self.started_at = time.perf_counter()
        self._thread = threading.Thread(
            target=self._run, args=(retry_after_open,), name="memoryd-integrity", daemon=True
        )
        self._thread.start()

    def _run(self, retry_after_open: bool) -> None:
        try:
            try:
                self.verdict = self._check()
            except StoreError as exc:
                if not retry_after_open:
                    raise
                # Not readable before the store opened it (WAL recovery, say): once more after.
                log.debug("store.integrity_check_deferred", extra=fields(reason=str(exc)))
                self._opened.wait()
                self.verdict = self._check()
        except Exception:
            log.exception("store.integrity_check_failed")
        finally:
            with self._lock:
                on_damage = self._on_damage if self.damaged else None
                self.finished_at = time.perf_counter()
                self._finished.set()
        if on_damage is not None:
            on_damage(self.problems)
        assert self.started_at is not None  # set by _begin, before this thread started
        seconds = round(time.perf_counter() - self.started_at, 3)
        if self.verdict == ["ok"]:
            log.info("store.integrity_ok", extra=fields(check="quick_check", seconds=seconds))
        elif self.verdict is None:
            log.info("store.integrity_check_stopped", extra=fields(seconds=seconds))
        # Damage is logged once by the store's condition, when the daemon hands it over.

    def _check(self) -> list[str] | None:
        if self._stopping:
            return None
        return quick_check_file(self._path, busy_timeout_ms=self._busy_timeout_ms, on_start=self._started)

    async def wait(self, seconds_after_start: float) -> None:
        """Until the check has finished, or until ``seconds_after_start`` after it began (in the
        constructor, or in :meth:`store_opened`, which start-up calls first)."""
        # Imported here: the check begins before trio is imported (~60 ms, head_start.py).
        import trio

        if self.finished:
            return
        assert self.started_at is not None, "wait() before the check began: call store_opened first"
        left = self.started_at + seconds_after_start - time.perf_counter()
        if left > 0:
            await trio.to_thread.run_sync(self._finished.wait, left, abandon_on_cancel=True)

    def stop(self) -> None:
        """Interrupt a running check (shutdown); safe to call at any time, more than once."""
        with self._lock:
            self._stopping = True
            interrupt = self._interrupt
        self._opened.set()  # a deferred attempt gives up
        if interrupt is not None:
            interrupt()

    def join(self) -> None:
        """Until the thread is gone (its connection closed): before the store closes."""
        if self._thread is not None:
            self._thread.join()

    def _started(self, interrupt: Callable[[], None]) -> None:
        # Called in the check's thread, on its connection, before the check runs.
        with self._lock:
            self._interrupt = interrupt
            stopping = self._stopping
        if stopping:
            interrupt()
