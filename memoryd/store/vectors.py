"""Vector spaces, generations and the scoped KNN.

One embedding model + dimension is one *vector space*; each space the store has used is a
*generation* with its own vec0 table ``vec_g<N>``.  Switching models is refused unless a
reindex was requested; then a new generation starts and the old table is dropped, so vectors
of two spaces are never compared.

Each vec0 row holds a 1-bit-per-dimension copy of the vector for the coarse scan and a 6-bit
copy (an auxiliary column) for rescoring (``vector_codec.py``):

* ``scope_key`` is a PARTITION KEY: a KNN only walks the chunks of the caller's scope, so a
  user with five memories among millions gets their five, and a big scope costs nothing to
  others.
* ``expires_at``, ``disclosure`` (the memory's disclosure code) and ``learned_chat`` (its
  chat_id) are metadata columns filtered inside the scan (``visibility.vector_filters``; vec0
  metadata cannot be NULL, so "never" is ``NEVER`` and "no chat" is ``''``).
* deleted memories are removed from the table.

Brute-force float32 KNN over 100k 384-d vectors takes ~45 ms on two cores, int8 ~40 ms; the
bit scan plus rescoring takes ~9 ms (bench/bench_store.py).  The scan is linear in the scope,
and sqlite-vec keeps its top k per chunk by selection, so it also costs ~k per vector: at 100k,
k=1 scans in 2.7 ms, k=64 in 9.2 ms, k=256 in 37 ms.  A ``distance <= T`` constraint drops the
vectors beyond T before that selection, so a big scope's scan is run with T = the farthest
k-th distance of its last 16 scans (``hamming_scan.py``): at 100k, 64 rows come back in ~5 ms
instead of 9-13; at 1M in 47-49 instead of 101-109.  When fewer than k rows pass, the scan
runs again without T, so the result is always the exact top k of the hamming scan (up to
which of the rows tied at the k-th distance it keeps).  A partition of 50k vectors or more is
scanned from a copy in memory instead (``bit_index.py``: ~5 ms at 1M), with the same result.

Every write to a vec0 table goes through this module (``write_vectors``, ``delete_vectors``,
``create_table``), which renews the partition's or the table's stamp in ``vector_epochs``:
that is how the copies know they are current.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import apsw
import numpy as np
import numpy.typing as npt

from memoryd.errors import EmbeddingModelMismatch, StoreError
from memoryd.store import bit_index, hamming_scan, meta, vector_codec
from memoryd.store.visibility import Scope, vector_branches, vector_filters

#: vec0 metadata columns cannot hold NULL; this stands for "never expires".
NEVER = (1 << 63) - 1
#: sqlite-vec's limit for one vector column.
MAX_DIM = 8192
#: Upper bound of sqlite-vec's ``k``.
MAX_K = 4096
#: Vectors per vec0 chunk.  Every scope (partition) allocates at least one whole chunk
#: (~32 KB at 384-d with 512), while a scan pays per chunk: 1024 scans 100k vectors ~20%
#: faster but doubles the floor cost of each small scope.
CHUNK_SIZE = 512

META_MODEL = "vector_model"
META_DIM = "vector_dim"
META_GENERATION = "vector_generation"
META_REINDEX_MODEL = "reindex_model"
META_REINDEX_DIM = "reindex_dim"

FloatArray = npt.NDArray[np.float32]

_TABLE_PREFIX = "vec_g"


def table_name(generation: int) -> str:
    """The vec0 table of one generation (an int we wrote ourselves: safe to format into SQL)."""
    return f"{_TABLE_PREFIX}{int(generation)}"


def is_table_name(name: str) -> bool:
    """Whether ``name`` is the vec0 table of some generation."""
    digits = name.removeprefix(_TABLE_PREFIX)
    return digits != name and digits.isdigit()


@dataclass(frozen=True, slots=True)
class VectorSpace:
    model: str
    dim: int
    generation: int

    @property
    def table(self) -> str:
        return table_name(self.generation)


def read_space(db: apsw.Connection) -> VectorSpace | None:
    """The current vector space (read on every search and add: one indexed query)."""
    values = meta.get_many(db, META_MODEL, META_DIM, META_GENERATION)
    model = values.get(META_MODEL)
    if model is None:
        return None
    return VectorSpace(model, int(values.get(META_DIM) or 0), int(values.get(META_GENERATION) or 0))


def read_reindex_target(db: apsw.Connection) -> tuple[str, int | None] | None:
    model = meta.get(db, META_REINDEX_MODEL)
    if model is None:
        return None
    dim = meta.get(db, META_REINDEX_DIM)
    return model, (int(dim) if dim else None)


def request_reindex(db: apsw.Connection, model: str, dim: int | None) -> None:
    meta.put(db, META_REINDEX_MODEL, model)
    meta.put(db, META_REINDEX_DIM, None if dim is None else str(int(dim)))


def configure(db: apsw.Connection, model: str, dim: int) -> tuple[VectorSpace, bool]:
    """Record or check the vector space; returns it and whether a new generation started.

    The caller enqueues embed jobs for a new generation in the same transaction.
    """
    if not model:
        raise StoreError("an embedding model name is required")
    if not 1 <= dim <= MAX_DIM:
        raise StoreError(f"embedding dimension {dim} is outside 1..{MAX_DIM}")
    current = read_space(db)
    target = read_reindex_target(db)
    if target is not None and target[0] == model and target[1] in (None, dim):
        return _start_generation(db, current, model, dim), True
    if current is None:
        return _start_generation(db, None, model, dim), True
    if (current.model, current.dim) == (model, dim):
        return current, False
    raise EmbeddingModelMismatch(
        f"the store's vectors come from {current.model} (dim {current.dim}), but the embedder is "
        f"{model} (dim {dim}); run `memoryd reindex` to re-embed every memory with the new model, "
        "or configure the old one again"
    )


def _start_generation(db: apsw.Connection, old: VectorSpace | None, model: str, dim: int) -> VectorSpace:
    # Generations only grow, also across a store that once had no space.
    last = int(meta.get(db, META_GENERATION) or 0)
    space = VectorSpace(model, dim, last + 1)
    create_table(db, space)
    if old is not None:
        db.execute(f"DROP TABLE IF EXISTS {old.table}")
    db.execute("UPDATE memories SET vector_gen = NULL WHERE vector_gen IS NOT NULL")
    meta.put(db, META_MODEL, model)
    meta.put(db, META_DIM, str(dim))
    meta.put(db, META_GENERATION, str(space.generation))
    meta.remove(db, META_REINDEX_MODEL, META_REINDEX_DIM)
    return space


def create_table(db: apsw.Connection, space: VectorSpace, *, renew_stamp: bool = True) -> None:
    """Create ``space``'s vec0 table unless it exists; ``renew_stamp``: give the table a new
    stamp (``vector_epochs``, schema m009: the steps before it call this with False)."""
    if renew_stamp:
        bit_index.renew_stamps(db, [bit_index.WHOLE_TABLE])
    db.execute(
        f"""
        CREATE VIRTUAL TABLE IF NOT EXISTS {space.table} USING vec0 (
            memory_rowid INTEGER PRIMARY KEY,
            scope_key TEXT PARTITION KEY,
            expires_at INTEGER,
            disclosure INTEGER,
            learned_chat TEXT,
            coarse BIT[{vector_codec.coarse_bits(space.dim)}],
            +embedding BLOB,
            chunk_size = {CHUNK_SIZE}
        )
        """
    )


def normalized(vector: npt.ArrayLike, dim: int) -> FloatArray | None:
    """The vector as unit-length float32, or None for a zero/NaN vector; wrong dim raises."""
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.shape[0] != dim:
        raise EmbeddingModelMismatch(f"vector has dimension {array.shape[0]}, the store's space has {dim}")
    norm = float(np.linalg.norm(array))
    if not np.isfinite(norm) or norm == 0.0:
        return None
    return array / norm


class VectorRow(NamedTuple):
    """What the vector table keeps of one memory, beside its vector."""

    rowid: int
    scope_key: str
    expires_at_ms: int | None
    disclosure: int  # visibility.Disclosure.code
    chat_id: str | None  # where it was learned


def write_vectors(db: apsw.Connection, space: VectorSpace, rows: Iterable[tuple[VectorRow, FloatArray]]) -> int:
    """Insert or replace vectors (unit length) with their memory's metadata."""
    count = 0
    partitions: set[str] = set()
    for row, vector in rows:
        # vec0 has no UPSERT; delete-then-insert keeps a retried job idempotent.
        partitions |= _delete_rows(db, space, [row.rowid])
        partitions.add(row.scope_key)
        db.execute(
            f"INSERT INTO {space.table} (memory_rowid, scope_key, expires_at, disclosure, learned_chat, coarse, "
            "embedding) VALUES (?, ?, ?, ?, ?, vec_bit(?), ?)",
            (
                row.rowid,
                row.scope_key,
                NEVER if row.expires_at_ms is None else row.expires_at_ms,
                row.disclosure,
                row.chat_id or "",
                vector_codec.coarse(vector),
                vector_codec.fine(vector),
            ),
        )
        count += 1
    bit_index.renew_stamps(db, partitions)
    return count


def delete_vectors(db: apsw.Connection, space: VectorSpace, rowids: Iterable[int]) -> None:
    bit_index.renew_stamps(db, _delete_rows(db, space, rowids))


def _delete_rows(db: apsw.Connection, space: VectorSpace, rowids: Iterable[int]) -> set[str]:
    """Delete the vectors of ``rowids``; returns the partitions they were in (whose stamps the
    caller renews, once per transaction)."""
    partitions: set[str] = set()
    for rowid in rowids:
        found = db.execute(f"SELECT scope_key FROM {space.table} WHERE memory_rowid = ?", (rowid,)).fetchone()
        if found is not None:
            partitions.add(found[0])
            db.execute(f"DELETE FROM {space.table} WHERE memory_rowid = ?", (rowid,))
    return partitions


def scan_state(db: apsw.Connection, scope: Scope) -> tuple[bit_index.Stamp, ...]:
    """What a KNN of ``scope`` depends on, as stamps: equal in two snapshots, the two scans of
    the scope give the same list (every write to a vec0 table renews its partition's stamp)."""
    return tuple(bit_index.read_stamp(db, key) for key in scope.visible_keys())


def knn(
    db: apsw.Connection,
    space: VectorSpace,
    scope: Scope,
    query: FloatArray,
    *,
    depth: int,
    coarse_k: int,
    now_ms: int,
    state: tuple[bit_index.Stamp, ...] | None = None,
) -> list[tuple[int, float]]:
    """The ``depth`` nearest unexpired memories ``scope`` can see: (rowid, cosine), best first.

    Each scope key and each branch of the disclosure rules is one partition-key KNN whose
    filters apply inside the vec0 scan, so hidden vectors never take a place of the top k; the
    coarse hamming candidates are rescored with the exact cosine.
    """
    k = max(1, min(max(coarse_k, depth), MAX_K))
    bits = vector_codec.coarse(query)
    found: dict[int, bytes] = {}
    from_copies: list[int] = []
    branches = list(zip(vector_filters(scope, now_ms), vector_branches(scope), strict=True))
    keys = scope.visible_keys()
    # ``state``: the caller's scan_state of this snapshot (read once, not again per copy).
    stamps = state if state is not None else scan_state(db, scope)
    for key, stamp in zip(keys, stamps, strict=True):
        copy = bit_index.BIT_INDEX.copy_for(db, space.table, key, stamp)
        for (filter_sql, filter_params), (codes, learned_chat) in branches:
            if copy is not None:
                from_copies.extend(rowid for rowid, _ in copy.nearest(bits, k, now_ms, codes, learned_chat))
                continue
            for rowid, blob, _ in hamming_scan.scan(db, space.table, bits, k, key, filter_sql, filter_params):
                found[rowid] = blob
    found.update(_rescoring_copies(db, space, [rowid for rowid in from_copies if rowid not in found]))
    rowids = list(found)
    blobs = list(found.values())
    if not rowids:
        return []
    cosines = vector_codec.cosines(blobs, query, space.dim)
    order = np.argsort(-cosines, kind="stable")[:depth]
    return [(rowids[i], float(cosines[i])) for i in order]


def cosines_for(db: apsw.Connection, space: VectorSpace, rowids: Iterable[int], query: FloatArray) -> dict[int, float]:
    """Exact cosine of the query with the stored vectors of ``rowids`` (those that have one)."""
    found = _rescoring_copies(db, space, rowids)
    if not found:
        return {}
    cosines = vector_codec.cosines(list(found.values()), query, space.dim)
    return dict(zip(found, (float(c) for c in cosines), strict=True))


def _rescoring_copies(db: apsw.Connection, space: VectorSpace, rowids: Iterable[int]) -> dict[int, bytes]:
    """The rescoring copies of those of ``rowids`` that have a vector."""
    wanted = list(dict.fromkeys(rowids))
    if not wanted:
        return {}
    # One statement: a round trip per rowid costs twice as much.  Read from vec0's own shadow
    # tables (sqlite-vec 0.1.9: the rowid map, which holds exactly the rows the table holds, and
    # the auxiliary column): 0.5 us a row, where a lookup through vec0 itself takes ~3 us.
    # Another sqlite-vec without those tables gets the lookup through vec0.
    table = space.table
    try:
        found = db.execute(
            f"SELECT w.value, a.value00 FROM json_each(?) AS w CROSS JOIN {table}_rowids AS r ON r.rowid = w.value "
            f"CROSS JOIN {table}_auxiliary AS a ON a.rowid = w.value",
            (json.dumps(wanted),),
        ).fetchall()
    except apsw.SQLError:
        found = db.execute(
            f"SELECT w.value, v.embedding FROM json_each(?) AS w CROSS JOIN {table} AS v ON v.memory_rowid = w.value",
            (json.dumps(wanted),),
        ).fetchall()
    return dict(found)
