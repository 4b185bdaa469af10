"""A big partition's sign bits kept in memory and scanned with numpy (issue 13, a million memories).

vec0's scan reads every chunk of the partition through SQLite on each query: at 1M memories
48 MB of sign bits plus rowids and the filtered metadata, ~45 ms of CPU even with the distance
bound (``hamming_scan.py``).  The same hamming distances over a column-major ``uint64`` copy in
memory take ~5 ms (``np.bitwise_count`` per 64-bit word), and the k nearest are a histogram
away.  So a partition of at least MIN_VECTORS vectors is copied once (rowids, sign bits,
expiry, disclosure code, vec0's tie order: ~74 bytes per vector; a few hundred ms at 1M) and scanned here.

Exactness: the copy is read from vec0's own chunks (sqlite-vec 0.1.9's shadow tables: the
validity bitmap, the rowids, the bit vectors and the integer metadata of each chunk), and it is
used only while the partition's stamp and the table's stamp (``vector_stamps.py``) are the ones
it was read under (``vectors.py`` renews them on every vector write and delete), so a scan of
the copy sees exactly the rows vec0 would scan in the same snapshot.  The filters are the
scan's own (``expires_at > now``, the disclosure codes, the chat a memory was learned in).  Rows
tied at the k-th distance are kept in vec0's order (``read_copy``), so a scan of the copy gives
vec0's list exactly: the copy changes a search's time, never its hits.

A stale copy is not re-read at once: only when the same new stamp is seen twice in a row, so a
partition being written to (a bulk import) keeps using vec0 instead of re-reading per search.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import apsw
import numpy as np
import numpy.typing as npt

from memoryd.store.sqlite.search.scope_stats import live_count
from memoryd.store.sqlite.vectors import vector_codec
from memoryd.store.sqlite.vectors.vector_stamps import Stamp, read_stamp
from memoryd.store.sqlite.vectors.vectors import VectorSpace

#: Smaller partitions are scanned by vec0.  At 10k vectors the copy's KNN (scan, then the 64
#: rescoring copies read by rowid) takes ~0.5-0.65 ms of CPU against vec0's ~0.95-1.1 ms; below a
#: few thousand the difference is a fraction of that and not worth a copy to keep current.
MIN_VECTORS = 5_000
#: Copies kept per process, by their size (1M vectors of 384 bits: ~74 MB): the RSS target
#: at 1M is 600 MB, the daemon without copies ~250 MiB.
MAX_BYTES = 192 * 1024 * 1024

log = logging.getLogger("memoryd.store")

#: A text metadata value in a chunk: its length (int32) and its first 12 bytes.
_TEXT_ENTRY = 16
_TEXT_PREFIX = 12

Key = tuple[str, str, str]  # database file, vec0 table, partition


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
        # Nearest first, ties in row order, which is vec0's (``read_copy``); rows tied at
        # ``reach`` beyond k places are dropped, the same ones vec0 drops.
        chosen = chosen[np.argsort(distances[chosen], kind="stable")][:k]
        return [(int(self.rowids[i]), float(distances[i])) for i in chosen]


def read_copy(db: apsw.Connection, space: VectorSpace, partition: str, stamp: Stamp) -> PartitionCopy:
    """The partition's live vectors from vec0's chunks (sqlite-vec 0.1.9 layout: one row per
    chunk in ``<table>_chunks`` with its validity bitmap and int64 rowids; the bit vectors and
    each metadata column in a blob per chunk, keyed by the chunk id: integers as int64, a text as
    16 bytes, its length (int32) and its first 12 bytes, the whole of a longer one in
    ``<table>_metadatatext<NN>`` by rowid)."""
    table = space.table
    chunks = db.execute(
        f"SELECT chunk_id, validity, rowids FROM {table}_chunks WHERE partition00 = ? ORDER BY chunk_id",
        (partition,),
    ).fetchall()
    if not chunks:
        empty = np.zeros(0, np.int64)
        return PartitionCopy(
            stamp, empty, np.zeros((0, 0), np.uint64), empty, np.zeros(0, np.int8), np.zeros(0, np.int32), {}
        )
    ids = json.dumps([chunk_id for chunk_id, _, _ in chunks])
    lives = [
        np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[: len(rowids) // 8].astype(bool)
        for _, validity, rowids in chunks
    ]
    # Each chunk's live rows last slot first: then the rows' order is the one vec0 keeps among
    # rows at one distance.  sqlite-vec 0.1.9 takes each chunk's k nearest by repeated
    # selection, and each pass keeps the last slot of those at the least distance (``<=``); it
    # merges a chunk's list into the best so far preferring the rows it had (``<=`` again).  So
    # among equals an earlier chunk comes first, and within a chunk a later slot.  (In this
    # order a 10k partition's copy gives exactly vec0's lists, and can stand in for vec0
    # without changing a hit.)
    rowids = np.concatenate(
        [np.frombuffer(r, np.int64)[live][::-1] for (_, _, r), live in zip(chunks, lives, strict=True)]
    )
    count = len(rowids)

    def fill(shadow: str, name: str, out: npt.NDArray[np.uint8]) -> None:
        """Copy the live slots of each chunk's blob in one shadow table into ``out``'s rows,
        blob by blob into arrays allocated once: no chunk-sized pieces left behind in the
        heap.  (One statement by chunk id: joined to the chunks table instead, SQLite scanned
        the blob tables, ~1 s at 1M.)"""
        cursor = db.execute(
            f"SELECT w.value, x.{name} FROM json_each(?) AS w CROSS JOIN {table}_{shadow} AS x ON x.rowid = w.value",
            (ids,),
        )
        start = 0
        for (chunk_id, _, _), live, found in itertools.zip_longest(chunks, lives, cursor):
            if found is None or chunk_id != found[0] or len(found[1]) != len(live) * out.shape[1]:
                raise LayoutMismatch(f"{table}_{shadow} has no blob of {len(live)} slots for chunk {chunk_id}")
            live_rows = np.frombuffer(found[1], np.uint8).reshape(len(live), -1)[live][::-1]  # as rowids
            out[start : start + len(live_rows)] = live_rows
            start += len(live_rows)

    # The sign bits in whole 64-bit words (zero bytes add nothing to a distance), then one row
    # per word: each word's column is contiguous for the scan.
    vector_bytes = vector_codec.coarse_bits(space.dim) // 8
    bits = np.zeros((count, -(-vector_bytes // 8) * 8), np.uint8)
    fill("vector_chunks00", "vectors", bits[:, :vector_bytes])
    words = bits.view(np.uint64).T.copy()
    del bits
    integers = np.empty((count, 8), np.uint8)
    fill("metadatachunks00", "data", integers)
    expires_at = integers.view(np.int64).reshape(-1).copy()
    fill("metadatachunks01", "data", integers)
    disclosure = integers.view(np.int64).reshape(-1).astype(np.int8)
    del integers
    entries = np.empty((count, _TEXT_ENTRY), np.uint8)
    fill("metadatachunks02", "data", entries)
    learned_in, chats = _chat_indexes(db, table, rowids, entries)
    return PartitionCopy(stamp, rowids, words, expires_at, disclosure, learned_in, chats)


def _chat_indexes(
    db: apsw.Connection, table: str, rowids: npt.NDArray[np.int64], entries: npt.NDArray[np.uint8]
) -> tuple[npt.NDArray[np.int32], dict[str, int]]:
    """Each row's chat as an index into the distinct chats of the partition (few: a memory is
    learned in one of its owner's chats)."""
    # Group equal entries by sorting their two 64-bit halves (np.unique over rows of bytes
    # took seconds at 1M); most partitions hold one or a few chats.
    halves = np.ascontiguousarray(entries).view(np.uint64)
    order = np.lexsort((halves[:, 1], halves[:, 0]))
    ordered = halves[order]
    starts = np.flatnonzero(np.any(ordered[1:] != ordered[:-1], axis=1)) + 1
    bounds = np.concatenate(([0], starts, [len(order)]))
    chats: dict[str, int] = {}
    learned_in = np.empty(len(rowids), np.int32)
    for first, end in zip(bounds[:-1], bounds[1:], strict=True):
        rows = order[first:end]
        entry = entries[rows[0]]
        length = int(entry[:4].view(np.int32)[0])
        if length <= _TEXT_PREFIX:
            learned_in[rows] = chats.setdefault(bytes(entry[4 : 4 + length]).decode(), len(chats))
            continue
        # Longer than the prefix: the whole text is kept by rowid.
        texts = dict(
            db.execute(
                f"SELECT w.value, t.data FROM json_each(?) AS w CROSS JOIN {table}_metadatatext02 AS t "
                "ON t.rowid = w.value",
                (json.dumps(rowids[rows].tolist()),),
            )
        )
        for row in rows:
            learned_in[row] = chats.setdefault(str(texts[int(rowids[row])]), len(chats))
    return learned_in, chats


class LayoutMismatch(ValueError):
    """vec0's shadow tables are not what this module reads (another sqlite-vec version).  It
    never leaves this module (``copy_for`` turns the copies off), so it is no MemorydError."""


class BitIndex:
    """The copies of one process, shared by its reader connections."""

    def __init__(self, min_vectors: int = MIN_VECTORS, max_bytes: int = MAX_BYTES) -> None:
        self.min_vectors = min_vectors
        #: vec0's chunks did not look as expected once: no more copies in this process.
        self.layout_mismatch = False
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._copies: OrderedDict[Key, PartitionCopy] = OrderedDict()
        #: The stamp each partition showed last without a current copy (or too small then).
        self._seen: dict[Key, tuple[Stamp, bool]] = {}
        self._loading: set[Key] = set()

    def __len__(self) -> int:
        """How many partitions have a copy now."""
        with self._lock:
            return len(self._copies)

    def copy_for(
        self, db: apsw.Connection, space: VectorSpace, partition: str, stamp: Stamp | None = None
    ) -> PartitionCopy | None:
        """The current copy of ``partition`` in ``db``'s snapshot, read now if it is due; None:
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
            if key in self._loading:  # another reader is reading it: one read at a time (RSS)
                return None
            self._loading.add(key)
        try:
            copy = read_copy(db, space, partition, stamp)
        except LayoutMismatch as exc:
            # Another sqlite-vec than the one this was written against: vec0 scans, as before.
            if not self.layout_mismatch:
                log.warning("vector scan copies are off: %s", exc)
            self.layout_mismatch = True
            return None
        finally:
            with self._lock:
                self._loading.discard(key)
        with self._lock:
            self._seen.pop(key, None)
            self._copies[key] = copy
            self._copies.move_to_end(key)
            while sum(c.nbytes for c in self._copies.values()) > self.max_bytes and len(self._copies) > 1:
                self._copies.popitem(last=False)
        return copy


BIT_INDEX = BitIndex()
