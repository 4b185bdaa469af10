"""One big partition's live vectors copied into memory (``PartitionCopy``) and scanned with numpy.

vec0's scan reads every chunk of the partition through SQLite on each query: at 1M memories
48 MB of sign bits plus rowids and the filtered metadata, ~45 ms of CPU even with the distance
bound (``hamming_scan.py``).  The same hamming distances over a column-major ``uint64`` copy in
memory take ~5 ms (``np.bitwise_count`` per 64-bit word), and the k nearest are a histogram
away: ~70 bytes per vector (rowids, sign bits, expiry, disclosure code, chat).

The copy is read from tables memoryd owns, never from sqlite-vec's internal ones: the sign bits
from ``vector_copies`` (written beside each vec0 row by ``vectors.write_vectors``), the filter
columns from the memories' own rows, which the vec0 row repeats.  The filters are the scan's
own (``expires_at > now``, the disclosure codes, the chat a memory was learned in), so the copy
finds the same hamming distances as vec0; among rows tied at the k-th distance it keeps the
lowest rowids, where vec0 keeps the ones its chunk layout puts first.  The exact cosine
rescoring that follows decides the hits, so a tie at the end of a 64-row shortlist seldom
matters.  Which copies are kept, and when one is read again, is ``bit_index.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import apsw
import numpy as np
import numpy.typing as npt

from memoryd.store.sqlite.vectors import vector_codec
from memoryd.store.sqlite.vectors.vector_stamps import Stamp
from memoryd.store.sqlite.vectors.vectors import NEVER, VectorSpace


class LayoutMismatch(ValueError):
    """The stored sign bits are not of the space's length (a damaged store).  It never leaves
    the vector scan (``BitIndex.copy_for`` turns the copies off), so it is no MemorydError."""


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
