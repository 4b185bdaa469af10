"""A big partition's sign bits kept in memory and scanned with numpy: which partitions have a
copy (``PartitionCopy``, ``partition_copy.py``), and when one is read.

A partition of at least MIN_VECTORS vectors is copied once and scanned in memory (~5 ms at 1M
vectors against vec0's ~45 ms).  A copy is used only while the partition's stamp and the
table's stamp (``vector_stamps.py``) are the ones it was read under (``vectors.py`` renews them
on every vector write and delete), so a scan of the copy sees exactly the rows vec0 would scan
in the same snapshot.

A stale copy is not re-read at once: only when the same new stamp is seen twice in a row, so a
partition being written to (a bulk import) keeps using vec0 instead of re-reading per search.
The read then happens in a thread of its own (``BitIndex``), the searches using vec0 until the
copy is in place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from pathlib import Path

import apsw

from memoryd.store.sqlite.db.connection import open_connection
from memoryd.store.sqlite.search.scope_stats import live_count
from memoryd.store.sqlite.vectors.partition_copy import LayoutMismatch, PartitionCopy, read_copy
from memoryd.store.sqlite.vectors.vector_stamps import Stamp, read_stamp
from memoryd.store.sqlite.vectors.vectors import VectorSpace

#: Smaller partitions are scanned by vec0.  At 10k vectors the copy's KNN (scan, then the 64
#: rescoring copies read by rowid) takes ~0.5-0.65 ms of CPU against vec0's ~0.95-1.1 ms; below a
#: few thousand the difference is a fraction of that and not worth a copy to keep current.
MIN_VECTORS = 5_000
#: Copies kept per process, by their size (1M vectors of 384 bits: ~74 MB): the RSS target
#: at 1M is 600 MB, the daemon without copies ~250 MiB.
MAX_BYTES = 192 * 1024 * 1024

#: A copy is read again only after this many times its last read's duration.
REREAD_PAUSE = 4.0

log = logging.getLogger("memoryd.store")

Key = tuple[str, str, str]  # database file, vec0 table, partition


class BitIndex:
    """The copies of one process, shared by its reader connections.

    ``background``: a due copy is read by a thread of its own, on a connection of its own,
    while the searches go on with vec0 (at 1M vectors the read takes 1-2 s of CPU, ~1.3 us a
    row through SQLite and apsw: no search waits for it).  Without it (tests of exactness),
    the search that finds the copy due reads it itself.

    A partition written to all the time would have its copy read again and again: a copy is
    not read again before ``reread_pause`` times its last read's duration has passed since
    that read ended, so the reads take at most ~1/(1 + reread_pause) of a core (vec0 scans
    meanwhile).
    """

    def __init__(
        self,
        min_vectors: int = MIN_VECTORS,
        max_bytes: int = MAX_BYTES,
        *,
        background: bool = True,
        reread_pause: float = REREAD_PAUSE,
    ) -> None:
        self.min_vectors = min_vectors
        self.reread_pause = reread_pause
        #: Sign bits of the wrong length were found once: no more copies in this process.
        self.layout_mismatch = False
        self.max_bytes = max_bytes
        self.background = background
        self._lock = threading.Lock()
        self._copies: OrderedDict[Key, PartitionCopy] = OrderedDict()
        #: The stamp each partition showed last without a current copy (or too small then).
        self._seen: dict[Key, tuple[Stamp, bool]] = {}
        self._loading: set[Key] = set()
        self._threads: list[threading.Thread] = []
        #: When each partition's copy may be read again (time.monotonic()).
        self._not_before: dict[Key, float] = {}

    def __len__(self) -> int:
        """How many partitions have a copy now."""
        with self._lock:
            return len(self._copies)

    def settle(self, timeout: float | None = None) -> None:
        """Wait until the copies being read in the background are in place."""
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout)

    def copy_for(
        self, db: apsw.Connection, space: VectorSpace, partition: str, stamp: Stamp | None = None
    ) -> PartitionCopy | None:
        """The current copy of ``partition`` in ``db``'s snapshot, read if it is due; None:
        scan it with vec0.  ``stamp``: the partition's, when the caller read it in this snapshot."""
        if self.layout_mismatch:
            return None
        key: Key = (db.filename, space.table, partition)
        if stamp is None:
            stamp = read_stamp(db, partition)
        with self._lock:
            copy = self._copies.get(key)
            if copy is not None and copy.stamp == stamp:
                self._copies.move_to_end(key)
                return copy
            seen = self._seen.get(key)
        if seen is not None and seen[0] == stamp and not seen[1]:
            return None  # too small at this stamp
        big = live_count(db, partition, self.min_vectors) >= self.min_vectors
        if not big or seen is None or seen[0] != stamp:
            with self._lock:
                self._seen[key] = (stamp, big)
                while len(self._seen) > 4 * 4096:
                    self._seen.pop(next(iter(self._seen)))
            return None
        if not self.claim_read(key):
            return None
        if self.background:
            thread = threading.Thread(
                target=self._read_apart, args=(db.filename, key, space, stamp), name="memoryd-bit-copy", daemon=True
            )
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
                thread.start()
            return None
        return self._read(db, key, space, stamp)

    def claim_read(self, key: Key) -> bool:
        """Take the one read of ``key``'s copy (True; the read gives it back, ``release_read``),
        unless it is being read already (one read at a time: RSS) or was read a moment ago
        (vec0 scans until the pause is over)."""
        with self._lock:
            if key in self._loading or time.monotonic() < self._not_before.get(key, 0.0):
                return False
            self._loading.add(key)
            return True

    def release_read(self, key: Key) -> None:
        """Give back a read taken with ``claim_read``."""
        with self._lock:
            self._loading.discard(key)

    def _read_apart(self, filename: str, key: Key, space: VectorSpace, stamp: Stamp) -> None:
        """Read the copy on a connection of this thread's own, if its snapshot still shows
        ``stamp`` (a later write makes the copy due again, at its own stamp)."""
        try:
            db = open_connection(Path(filename), busy_timeout_ms=5000, readonly=True)
            try:
                with db:
                    if read_stamp(db, key[2]) == stamp:
                        self._read(db, key, space, stamp)
            finally:
                db.close()
        except Exception:  # a thread of its own: nobody else would hear of it
            log.warning("vector scan copy of a partition could not be read", exc_info=True)
            with self._lock:  # not tried again before the partition's next write
                self._seen[key] = (stamp, False)
        finally:
            self.release_read(key)

    def _read(self, db: apsw.Connection, key: Key, space: VectorSpace, stamp: Stamp) -> PartitionCopy | None:
        started = time.monotonic()
        try:
            copy = read_copy(db, space, key[2], stamp)
        except LayoutMismatch as exc:
            # A damaged store: vec0 scans, as before (``memoryd check`` finds the bad rows).
            if not self.layout_mismatch:
                log.warning("vector scan copies are off: %s", exc)
            self.layout_mismatch = True
            return None
        finally:
            ended = time.monotonic()
            with self._lock:
                self._loading.discard(key)
                self._not_before[key] = ended + self.reread_pause * (ended - started)
                while len(self._not_before) > 4 * 4096:
                    self._not_before.pop(next(iter(self._not_before)))
        with self._lock:
            self._seen.pop(key, None)
            self._copies[key] = copy
            self._copies.move_to_end(key)
            while sum(c.nbytes for c in self._copies.values()) > self.max_bytes and len(self._copies) > 1:
                self._copies.popitem(last=False)
        return copy


BIT_INDEX = BitIndex()
