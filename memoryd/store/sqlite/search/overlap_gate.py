"""Whether a scope is big enough for its search's parts to be overlapped (``overlapped_search.py``).

Overlapping pays where the parts are long: at 100k memories in a scope the keyword part takes
~4 ms and the KNN scan ~5-7 ms, and running them beside the query's embedding and each other
saved 0.1-5 ms a search.  At 10k they take ~1.5 ms each, the overlap gained nothing measurable,
and its extra worker-thread calls (three more per search) and a second reader cost CPU: 3.5 ms
instead of 2.8 ms for a vector-only search, +0.6-1 ms in the daemon.  So a scope is searched
in one worker-thread call unless it holds at least ``overlap_from`` live memories.  (That call
still reads its keyword part beside the embedding when the embedder can start the query on its
own thread: ``overlapped_search._plain`` does that without a thread call of its own.)

The size is counted (up to the line: ~0.6 ms at 10k) in the same worker-thread call as a plain
search, and trusted for REMEASURE_SECONDS: a scope that grows past the line is overlapped from
its next count on.  The choice never changes a result, only how the same search is scheduled
(tests/test_overlapped_search.py compares both ways with the sequential search).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import apsw

from memoryd.store.sqlite.search.scope_stats import live_count
from memoryd.store.visibility import Scope

#: Scopes holding at least this many live memories overlap their search's parts.  The line lies
#: between the 10k (no gain, more CPU) and the 100k (a gain) measured in the README.
OVERLAP_FROM = 30_000
#: How long a scope's count is trusted before a plain search counts it again.
REMEASURE_SECONDS = 30.0
#: Scopes remembered (an entry is a few dozen bytes).
_MAX_SCOPES = 4096

Keys = tuple[str, ...]


class OverlapGate:
    """Per store: which scopes are big enough to overlap, counted now and then."""

    def __init__(self, overlap_from: int = OVERLAP_FROM, clock: Callable[[], float] = time.monotonic) -> None:
        """``overlap_from`` 0 overlaps every search (tests of the overlapped path)."""
        self.overlap_from = overlap_from
        self._clock = clock
        self._lock = threading.Lock()  # counted in reader threads, asked in the trio thread
        self._known: OrderedDict[Keys, tuple[bool, float]] = OrderedDict()  # keys -> (big, until)

    def worth_overlapping(self, scope: Scope) -> bool:
        """Whether ``scope`` was counted big lately (not counted, or not lately: no)."""
        if self.overlap_from <= 0:
            return True
        known = self._lookup(tuple(scope.visible_keys()))
        return known is not None and known[0] and self._clock() < known[1]

    def needs_count(self, scope: Scope) -> bool:
        """Whether the next plain search of ``scope`` should count it (``count``)."""
        if self.overlap_from <= 0:
            return False
        known = self._lookup(tuple(scope.visible_keys()))
        return known is None or self._clock() >= known[1]

    def count(self, db: apsw.Connection, scope: Scope) -> None:
        """Count ``scope``'s live memories up to the line, in a reader's worker-thread call."""
        keys = tuple(scope.visible_keys())
        missing = self.overlap_from
        for key in keys:
            if missing > 0:
                missing -= live_count(db, key, missing)
        with self._lock:
            self._known[keys] = (missing <= 0, self._clock() + REMEASURE_SECONDS)
            self._known.move_to_end(keys)
            while len(self._known) > _MAX_SCOPES:
                self._known.popitem(last=False)

    def _lookup(self, keys: Keys) -> tuple[bool, float] | None:
        with self._lock:
            return self._known.get(keys)
