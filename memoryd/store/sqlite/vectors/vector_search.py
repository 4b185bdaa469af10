"""The scoped KNN: a scope's nearest vectors, and exact cosines for chosen rows.

Brute-force float32 KNN over 100k 384-d vectors takes ~45 ms on two cores, int8 ~40 ms; the
bit scan plus rescoring takes ~9 ms (bench/bench_store.py).  The scan is linear in the scope,
and sqlite-vec keeps its top k per chunk by selection, so it also costs ~k per vector: at 100k,
k=1 scans in 2.7 ms, k=64 in 9.2 ms, k=256 in 37 ms.  A ``distance <= T`` constraint drops the
vectors beyond T before that selection, so a big scope's scan is run with T = the farthest
k-th distance of its last 16 scans (``hamming_scan.py``): at 100k, 64 rows come back in ~5 ms
instead of 9-13; at 1M in 47-49 instead of 101-109.  When fewer than k rows pass, the scan
runs again without T, so the result is always the exact top k of the hamming scan (up to
which of the rows tied at the k-th distance it keeps).  A partition of ``bit_index.MIN_VECTORS``
(5k) vectors or more is scanned from a copy in memory instead (``bit_index.py``: ~5 ms at 1M):
the same hamming distances, only rows tied at the k-th distance may be others.  Either way the
shortlist is rescored from the rescoring copies in ``vector_copies``.

The tables and their rows are ``vectors.py``'s, their stamps ``vector_stamps.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw
import numpy as np
import numpy.typing as npt

from memoryd.store.sqlite.vectors import bit_index, hamming_scan, vector_codec, vectors
from memoryd.store.sqlite.vectors.vector_stamps import Stamp, read_stamp
from memoryd.store.sqlite.vectors.vectors import FloatArray, VectorSpace
from memoryd.store.sqlite.visibility_sql import vector_filters
from memoryd.store.visibility import Scope, vector_branches

#: Upper bound of sqlite-vec's ``k``.
MAX_K = 4096


def scan_state(db: apsw.Connection, scope: Scope) -> tuple[Stamp, ...]:
    """What a KNN of ``scope`` depends on, as stamps: equal in two snapshots, the two scans of
    the scope give the same list (every write to a vec0 table renews its partition's stamp)."""
    return tuple(read_stamp(db, key) for key in scope.visible_keys())


def knn(
    db: apsw.Connection,
    space: VectorSpace,
    scope: Scope,
    query: FloatArray,
    *,
    depth: int,
    coarse_k: int,
    now_ms: int,
    state: tuple[Stamp, ...] | None = None,
) -> list[tuple[int, float]]:
    """The ``depth`` nearest unexpired memories ``scope`` can see: (rowid, cosine), best first.

    Each scope key and each branch of the disclosure rules is one partition-key KNN whose
    filters apply inside the vec0 scan, so hidden vectors never take a place of the top k; the
    coarse hamming candidates are rescored with the exact cosine.
    """
    nearest, _ = knn_with_second(
        db, space, scope, query, None, depth=depth, coarse_k=coarse_k, now_ms=now_ms, state=state
    )
    return nearest


def knn_with_second(
    db: apsw.Connection,
    space: VectorSpace,
    scope: Scope,
    query: FloatArray,
    second: FloatArray | None,
    *,
    depth: int,
    coarse_k: int,
    now_ms: int,
    state: tuple[Stamp, ...] | None = None,
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """:func:`knn`, and each of its rows' cosine with a ``second`` unit query (relevance's
    adapted query) from the same read of the rescoring copies ({} without one)."""
    k = max(1, min(max(coarse_k, depth), MAX_K))
    bits = vector_codec.coarse(query)
    shortlist: list[int] = []
    branches = list(zip(vector_filters(scope, now_ms), vector_branches(scope), strict=True))
    keys = scope.visible_keys()
    # ``state``: the caller's scan_state of this snapshot (read once, not again per copy).
    stamps = state if state is not None else scan_state(db, scope)
    for key, stamp in zip(keys, stamps, strict=True):
        copy = bit_index.BIT_INDEX.copy_for(db, space, key, stamp)
        for (filter_sql, filter_params), (codes, learned_chat) in branches:
            if copy is not None:
                shortlist.extend(rowid for rowid, _ in copy.nearest(bits, k, now_ms, codes, learned_chat))
                continue
            shortlist.extend(
                rowid for rowid, _ in hamming_scan.scan(db, space.table, bits, k, key, filter_sql, filter_params)
            )
    rowids, cosines, seconds = _exact(db, space, shortlist, query, second)
    order = np.argsort(-cosines, kind="stable")[:depth]
    nearest = [(rowids[i], float(cosines[i])) for i in order]
    return nearest, {rowids[i]: float(seconds[i]) for i in order} if seconds is not None else {}


def cosines_for(db: apsw.Connection, space: VectorSpace, rowids: Iterable[int], query: FloatArray) -> dict[int, float]:
    """Exact cosine of the query with the stored vectors of ``rowids`` (those that have one)."""
    return cosines_with_second(db, space, rowids, query, None)[0]


def cosines_with_second(
    db: apsw.Connection, space: VectorSpace, rowids: Iterable[int], query: FloatArray, second: FloatArray | None
) -> tuple[dict[int, float], dict[int, float]]:
    """:func:`cosines_for`, and the same rows' cosines with a ``second`` unit query from the same
    read ({} without one)."""
    found, cosines, seconds = _exact(db, space, rowids, query, second)
    firsts = dict(zip(found, cosines.tolist(), strict=True))
    return firsts, dict(zip(found, seconds.tolist(), strict=True)) if seconds is not None else {}


def _exact(
    db: apsw.Connection, space: VectorSpace, rowids: Iterable[int], query: FloatArray, second: FloatArray | None
) -> tuple[list[int], npt.NDArray[np.float32], npt.NDArray[np.float32] | None]:
    """The rows of ``rowids`` that have a vector, their cosines with ``query`` and (when given)
    with ``second``: one read of their rescoring copies, one decoding."""
    found = vectors.fine_copies(db, rowids)
    if not found:
        return [], np.empty(0, dtype=np.float32), None if second is None else np.empty(0, dtype=np.float32)
    blobs = list(found.values())
    if second is None:
        return list(found), vector_codec.cosines(blobs, query, space.dim), None
    firsts, seconds = vector_codec.cosines_of_each(blobs, [query, second], space.dim)
    return list(found), firsts, seconds
