"""A big partition's sign bits kept in memory and scanned with numpy.

vec0's scan reads every chunk of the partition through SQLite on each query: at 1M memories
48 MB of sign bits plus rowids and the filtered metadata, ~45 ms of CPU even with the distance
bound (``hamming_scan.py``).  The same hamming distances over a column-major ``uint64`` copy in
memory take ~5 ms (``np.bitwise_count`` per 64-bit word), and the k nearest are a histogram
away.  So a partition of at least MIN_VECTORS vectors is copied once (rowids, sign bits,
expiry, disclosure code, chat: ~70 bytes per vector) and scanned here.

The copy is read from tables memoryd owns, never from sqlite-vec's internal ones: the sign bits
from ``vector_copies`` (written beside each vec0 row by ``vectors.write_vectors``), the filter
columns from the memories' own rows, which the vec0 row repeats.  It is used only while the
partition's stamp and the table's stamp (``vector_stamps.py``) are the ones it was read under
(``vectors.py`` renews them on every vector write and delete), so a scan of the copy sees
exactly the rows vec0 would scan in the same snapshot.  The filters are the scan's own
(``expires_at > now``, the disclosure codes, the chat a memory was learned in), so the copy
finds the same hamming distances as vec0; among rows tied at the k-th distance it keeps the
lowest rowids, where vec0 keeps the ones its chunk layout puts first.  The exact cosine
rescoring that follows decides the hits, so a tie at the end of a 64-row shortlist seldom
matters.

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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import apsw
import numpy as np
import numpy.typing as npt

from memoryd.store.sqlite.db.connection import open_connection
from memoryd.store.sqlite.search.scope_stats import live_count
from memoryd.store.sqlite.vectors import vector_codec
from memoryd.store.sqlite.vectors.vector_stamps import Stamp, read_stamp
from memoryd.store.sqlite.vectors.vectors import NEVER, VectorSpace

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


class LayoutMismatch(ValueError):
    """The stored sign bits are not of the space's length (a damaged store).  It never leaves
    this module (``copy_for`` turns the copies off), so it is no MemorydError."""


@dataclass(frozen=True, slots=True)
class PartitionCopy:
    """The live vectors of one partition at one stamp."""

    stamp: Stamp
    rowids: npt.NDArray[np.int64]
    words: npt.NDArray[np.uint64]  # (bits / 64, n): one row per 64-bit word, for contiguous scans
    expires_at: npt.NDArray[np.int64]
    disclosure: npt.NDArray[np.int8]
    learned_in: npt.NDArray[np.int32]  # the chat each was learned in, as an index into ``chats``
    chats: dict[str, int]

    @property
    def nbytes(self) -> int:
        arrays = (self.rowids, self.words, self.expires_at, self.disclosure, self.learned_in)
        return sum(int(array.nbytes) for array in arrays)

    def distances(self, bits: bytes) -> npt.NDArray[np.uint16]:
        """Hamming distance of every vector to the packed query bits."""
        query = np.frombuffer(bits + bytes(-len(bits) % 8), dtype=np.uint64)
        total = np.bitwise_count(self.words[0] ^ query[0]).astype(np.uint16)
        for word, value in zip(self.words[1:], query[1:], strict=True):
            total += np.bitwise_count(word ^ value)
        return total

    def nearest(
        self, bits: bytes, k: int, now_ms: int, codes: Sequence[int], learned_chat: str | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` vectors nearest to ``bits`` among the unexpired ones whose disclosure code
        is in ``codes`` (and learned in ``learned_chat``, unless None): (rowid, hamming
        distance), nearest first."""
        chat = None if learned_chat is None else self.chats.get(learned_chat)
        if not len(self.rowids) or (learned_chat is not None and chat is None):
            return []
        distances = self.distances(bits)
        allowed = np.zeros(max(max(codes, default=0), int(self.disclosure.max(initial=0))) + 1, dtype=bool)
        allowed[list(codes)] = True
        passing = (self.expires_at > now_ms) & allowed[self.disclosure]
        if chat is not None:
            passing &= self.learned_in == chat
        far = np.uint16(self.words.shape[0] * 64 + 1)  # beyond any distance: filtered out
        distances = np.where(passing, distances, far)
        counts = np.bincount(distances, minlength=int(far) + 1)
        # The smallest distance d whose rows (with all nearer ones) fill k places.
        reach = int(np.searchsorted(np.cumsum(counts), k))
        reach = min(reach, int(far) - 1)
        chosen = np.flatnonzero(distances <= reach)
        # Nearest first, ties in rowid order (``read_copy``); rows tied at ``reach`` beyond k
        # places are dropped.
        chosen = chosen[np.argsort(distances[chosen], kind="stable")][:k]
        return [(int(self.rowids[i]), float(distances[i])) for i in chosen]


#: The rows of one partition that have a vector: vec0 holds a vector for exactly the live
#: memories with ``vector_copies`` rows (``vectors.write_vectors``), with the memory's own
#: scope, expiry, disclosure code and chat (``consistency.py`` checks that they agree).
_PARTITION_SQL = (
    f"SELECT m.rowid, coalesce(m.expires_at_ms, {NEVER}), m.disclosure, coalesce(m.chat_id, ''), c.coarse "
    "FROM memories AS m CROSS JOIN vector_copies AS c ON c.memory_rowid = m.rowid "
    "WHERE m.scope_key = ? AND m.deleted_at_ms IS NULL"
)


def read_copy(db: apsw.Connection, space: VectorSpace, partition: str, stamp: Stamp) -> PartitionCopy:
    """The partition's vectors and their filter columns, from ``vector_copies`` and the
    memories' rows, in rowid order (the order of rows tied at one distance).  ~1.3 us of CPU
    per vector, nearly all of it SQLite's and apsw's per row (a few hundred ms at 100k)."""
    rows = db.execute(_PARTITION_SQL, (partition,)).fetchall()
    count = len(rows)
    if not count:
        empty = np.zeros(0, np.int64)
        return PartitionCopy(
            stamp, empty, np.zeros((0, 0), np.uint64), empty, np.zeros(0, np.int8), np.zeros(0, np.int32), {}
        )
    rowid_list, expiry_list, disclosure_list, chat_list, coarse_list = zip(*rows, strict=True)
    del rows
    rowids = np.array(rowid_list, np.int64)
    order = np.argsort(rowids, kind="stable")
    vector_bytes = vector_codec.coarse_bits(space.dim) // 8
    joined = b"".join(coarse_list)
    if len(joined) != count * vector_bytes:
        raise LayoutMismatch(f"vector_copies holds sign bits of another length than {vector_bytes} bytes")
    # The sign bits in whole 64-bit words (zero bytes add nothing to a distance), then one row
    # per word: each word's column is contiguous for the scan.
    bits = np.zeros((count, -(-vector_bytes // 8) * 8), np.uint8)
    bits[:, :vector_bytes] = np.frombuffer(joined, np.uint8).reshape(count, vector_bytes)
    del joined
    words = bits[order].view(np.uint64).T.copy()
    del bits
    # Few distinct chats per partition (a memory is learned in one of its owner's chats).
    chats = {chat: i for i, chat in enumerate(dict.fromkeys(chat_list))}
    learned_in = np.fromiter(map(chats.__getitem__, chat_list), np.int32, count)
    return PartitionCopy(
        stamp,
        rowids[order],
        words,
        np.array(expiry_list, np.int64)[order],
        np.array(disclosure_list, np.int8)[order],
        learned_in[order],
        chats,
    )


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
        with self._lock:
            if key in self._loading:  # being read already: one read at a time (RSS)
                return None
            if time.monotonic() < self._not_before.get(key, 0.0):
                return None  # read a moment ago: vec0 scans until the pause is over
            self._loading.add(key)
            if self.background:
                thread = threading.Thread(
                    target=self._read_apart, args=(db.filename, key, space, stamp), name="memoryd-bit-copy", daemon=True
                )
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
                thread.start()
                return None
        return self._read(db, key, space, stamp)

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
            with self._lock:
                self._loading.discard(key)

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
