"""Whether the store can take writes: ``ok``, ``full`` (the disk) or ``corrupt`` (the file).

The connections report what SQLite answered (``Database`` calls ``full``, ``corrupt`` and
``wrote``); system.health and the systemd status line read ``current``.  Each change of state is
logged once, so a full disk under load writes two log lines (full, then space returned), not one
per failed call.  ``full`` clears itself once the file system has ``MIN_FREE_BYTES`` free again
(looked at after each write and whenever health asks): not on the first write that succeeds,
since small writes fit in WAL space the failed ones left allocated, and a condition flapping
with each call would tell an operator nothing.  ``corrupt`` never clears (the file must be
checked and restored by a person), and while it holds no write is attempted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import msgspec

from memoryd.errors import DiskFull, StoreCorrupt
from memoryd.ids import now_ms
from memoryd.log import fields
from memoryd.store.storage_state import OK, Condition, State

log = logging.getLogger("memoryd.store")


#: Free bytes that count as "space returned" after SQLITE_FULL.
MIN_FREE_BYTES = 1 << 20


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the file system holding ``path``."""
    info = os.statvfs(path.parent)
    return info.f_bavail * info.f_frsize


class StorageCondition:
    """The store's one state; safe to update from the writer's and the readers' threads."""

    def __init__(self, path: Path, free: Callable[[], int] | None = None) -> None:
        self._path = path
        self._free = free or (lambda: free_bytes(path))
        self._lock = threading.Lock()
        self._current = OK

    @property
    def current(self) -> Condition:
        """The state now: a full disk that has space again is ok (and that is logged)."""
        if self._current.state == "full":
            self._clear_if_space()
        return self._current

    def full(self) -> None:
        self._change("full", "the disk is full: adds and deletes fail (nothing is written) until space is freed")

    def corrupt(self, detail: str) -> None:
        self._change(
            "corrupt",
            f"the database file is damaged ({detail}): writes are stopped; "
            "run `memoryd check`, then restore a backup (see `memoryd backup`)",
        )

    def wrote(self) -> None:
        """A write transaction committed: perhaps because space returned."""
        if self._current.state == "full":
            self._clear_if_space()

    def _clear_if_space(self) -> None:
        try:
            free = self._free()
        except OSError:
            return
        if free < MIN_FREE_BYTES:
            return
        with self._lock:
            if self._current.state != "full":
                return
            self._current = OK
        log.warning("store.space_returned: writes succeed again", extra=fields(path=str(self._path), free_bytes=free))

    def _change(self, state: State, reason: str) -> None:
        with self._lock:
            # corrupt outranks full: freeing space does not mend a damaged file.
            if self._current.state == state or self._current.state == "corrupt":
                return
            self._current = Condition(state, reason, now_ms())
        log.error("store.%s: %s", state, reason, extra=fields(path=str(self._path)))


#: What reading a row that was damaged on disk raises (beyond SQLite's own page checks): memoryd
#: only ever writes valid UTF-8 (the validators refuse lone surrogates) and valid JSON columns.
UNDECODABLE_ROW = (UnicodeDecodeError, msgspec.DecodeError)


@contextlib.contextmanager
def reporting_to(condition: StorageCondition, *, writing: bool) -> Iterator[None]:
    """Turn SQLite's verdicts on the storage into our errors, and tell ``condition``."""
    try:
        yield
    except apsw.FullError:
        condition.full()
        raise DiskFull("the disk is full: nothing was written") from None
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        condition.corrupt(str(exc))
        raise StoreCorrupt(f"the database file is damaged: {exc}") from None
    except UNDECODABLE_ROW:
        reason = "a row holds text or JSON that does not decode"
        condition.corrupt(reason)
        raise StoreCorrupt(f"the database file is damaged: {reason}") from None
    if writing:
        condition.wrote()
