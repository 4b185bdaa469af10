"""Hit counting: which memories search, list and get returned, and when.

A search must not pay for a write, so hits are only counted in memory here; the daemon's
maintenance task flushes the counts every few seconds in one write transaction
(``Lifecycle.flush_hits``), and closing the store flushes what is left.  The counts are
best-effort statistics for eviction: a crash loses the last few seconds of them, nothing else.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import apsw

#: Distinct memories remembered between flushes; past it new ones are not counted (a flush
#: that keeps failing must not grow the daemon without bound).
MAX_PENDING = 100_000

#: (memory id, hits since the last flush, last hit in ms)
HitEntry = tuple[str, int, int]


class HitCounter:
    """Hit counts accumulated between flushes (thread-safe: the store closes from a worker)."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self._max_pending = max_pending
        self._pending: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        self.dropped = 0

    def note(self, memory_ids: Iterable[str], at_ms: int) -> None:
        with self._lock:
            for memory_id in memory_ids:
                entry = self._pending.get(memory_id)
                if entry is not None:
                    entry[0] += 1
                    entry[1] = max(entry[1], at_ms)
                elif len(self._pending) < self._max_pending:
                    self._pending[memory_id] = [1, at_ms]
                else:
                    self.dropped += 1

    def __len__(self) -> int:
        return len(self._pending)

    def drain(self) -> list[HitEntry]:
        with self._lock:
            pending, self._pending = self._pending, {}
        return [(memory_id, count, last) for memory_id, (count, last) in pending.items()]

    def restore(self, entries: Iterable[HitEntry]) -> None:
        """Put back the entries of a flush that failed, merged with what arrived meanwhile."""
        with self._lock:
            for memory_id, count, last in entries:
                entry = self._pending.setdefault(memory_id, [0, last])
                entry[0] += count
                entry[1] = max(entry[1], last)


def write_hits(db: apsw.Connection, entries: list[HitEntry]) -> None:
    """Add the counts to the rows (gone memories are simply not matched)."""
    db.executemany(
        "UPDATE memories SET access_count = access_count + ?, "
        "last_access_ms = max(coalesce(last_access_ms, 0), ?) WHERE id = ?",
        [(count, last, memory_id) for memory_id, count, last in entries],
    )
