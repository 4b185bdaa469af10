"""Hit counting on PostgreSQL: the memories search, list and get returned, counted in memory and
written by the maintenance task's ``flush_hits`` (and on close), so a read never pays for a write."""

from __future__ import annotations

import threading
from collections.abc import Iterable


class Hits:
    """Reads of search, list and get, counted here and written by ``flush_hits``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[int, int]] = {}

    def note(self, memory_ids: Iterable[str], at_ms: int) -> None:
        with self._lock:
            for memory_id in memory_ids:
                count, _ = self._pending.get(memory_id, (0, 0))
                self._pending[memory_id] = (count + 1, at_ms)

    def restore(self, entries: list[tuple[str, int, int]]) -> None:
        """Counts whose write failed: kept for the next flush."""
        with self._lock:
            for rowid, count, at in entries:
                pending, last = self._pending.get(rowid, (0, 0))
                self._pending[rowid] = (pending + count, max(last, at))

    def drain(self) -> list[tuple[str, int, int]]:
        with self._lock:
            pending, self._pending = self._pending, {}
        return [(rowid, count, at) for rowid, (count, at) in pending.items()]
