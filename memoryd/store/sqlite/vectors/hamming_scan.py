"""One partition's coarse KNN (vec0 hamming scan), bounded by the distance its last scans found.

sqlite-vec 0.1.9 keeps the best k of each chunk by repeated selection, so a scan costs about
``n * k``: at 100k vectors k=1 takes 2.7 ms, k=64 9.2 ms (niced, shared 2-core machine).  With
``distance <= T`` in the query, vectors beyond T are dropped before that selection; T = the k-th
distance of the scope's recent scans brings k=64 down to ~4 ms (measured with T from 200 down
to 150: 14, 4.5 and 3.4 ms).  A T too tight returns fewer than k rows, and the scan runs again
without it, so the answer never depends on the hint; only the time does.

The bound is the farthest k-th distance of the partition's last RECENT scans: a rerun costs a
whole plain scan on top of the bounded one, while a bound a few bits too loose only lets a few
more rows into the selection, so the bound follows the spread of the queries rather than their
middle (at 1M random vectors, "k-th distance minus one bit per scan" missed often enough to
eat the gain).  Hints live per process, keyed by database file, table, partition and filter
branch.  Only scans that filled all k places leave one, so a small scope (fewer than k
vectors) never pays a rerun.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Sequence

import apsw

#: Scans remembered per partition: the bound is the farthest k-th distance among them.
RECENT = 16
#: Partitions remembered (an entry is a few dozen bytes).
_MAX_HINTS = 4096

Key = tuple[str, str, str, str]
Row = tuple[int, float]  # memory_rowid, hamming distance


class HammingHints:
    """The k-th hamming distances the recent scans of each partition found."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kth: OrderedDict[Key, deque[float]] = OrderedDict()

    def get(self, key: Key) -> float | None:
        """The bound for the next scan: the farthest recent k-th distance."""
        with self._lock:
            recent = self._kth.get(key)
            return max(recent) if recent else None

    def learn(self, key: Key, kth: float) -> None:
        with self._lock:
            recent = self._kth.pop(key, None) or deque(maxlen=RECENT)
            recent.append(kth)
            self._kth[key] = recent
            while len(self._kth) > _MAX_HINTS:
                self._kth.popitem(last=False)

    def forget(self, key: Key) -> None:
        with self._lock:
            self._kth.pop(key, None)


HINTS = HammingHints()


def scan(
    db: apsw.Connection,
    table: str,
    bits: bytes,
    k: int,
    partition: str,
    filter_sql: str,
    filter_params: Sequence[object],
    *,
    hints: HammingHints = HINTS,
) -> list[Row]:
    """The ``k`` rows of ``partition`` (passing ``filter_sql``) nearest to ``bits``, nearest first."""
    sql = (
        f"SELECT memory_rowid, distance FROM {table} "
        f"WHERE coarse MATCH vec_bit(?) AND k = ? AND scope_key = ? AND {filter_sql}"
    )
    key: Key = (db.filename, table, partition, filter_sql)
    bound = hints.get(key)
    if bound is not None:
        rows = db.execute(sql + " AND distance <= ?", (bits, k, partition, *filter_params, bound)).fetchall()
        if len(rows) == k:
            hints.learn(key, rows[-1][1])
            return rows
    rows = db.execute(sql, (bits, k, partition, *filter_params)).fetchall()
    if len(rows) == k:
        hints.learn(key, rows[-1][1])
    else:
        hints.forget(key)  # the partition holds fewer than k: nothing to bound
    return rows
