"""Vector spaces, generations, and the vec0 tables' rows.

One embedding model + dimension is one *vector space*; each space the store has used is a
*generation* with its own vec0 table ``vec_g<N>``.  Switching models is refused unless a
reindex was requested; then a new generation starts and the old table is dropped, so vectors
of two spaces are never compared.

Each vector is kept twice, in the same transaction (``vector_codec.py`` for the formats):

* ``vector_copies`` (schema m014), a plain table memoryd owns: per memory rowid the sign bits
  (``coarse``) that the in-memory scan copies are read from (``bit_index.py``) and the 6-bit
  rescoring copy (``fine``).  Nothing reads sqlite-vec's internal tables.
* the vec0 table, which holds the sign bits again for sqlite-vec's own filtered KNN, used for
  scopes too small to be worth an in-memory copy:

* ``scope_key`` is a PARTITION KEY: a KNN only walks the chunks of the caller's scope, so a
  user with five memories among millions gets their five, and a big scope costs nothing to
  others.
* ``expires_at``, ``disclosure`` (the memory's disclosure code) and ``learned_chat`` (its
  chat_id) are metadata columns filtered inside the scan (``visibility.vector_filters``; vec0
  metadata cannot be NULL, so "never" is ``NEVER`` and "no chat" is ``''``).
* deleted memories are removed from the table.

The scoped KNN over these tables is ``vector_search.py``.

Every write to a vec0 table or to ``vector_copies`` goes through this module
(``write_vectors``, ``delete_vectors``, ``create_table``), which renews the partition's or the
table's stamp (``vector_stamps.py``): that is how the in-memory copies know they are current.
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
from memoryd.store.sqlite.db import meta
from memoryd.store.sqlite.vectors import vector_codec
from memoryd.store.sqlite.vectors.vector_stamps import WHOLE_TABLE, renew_stamps

#: vec0 metadata columns cannot hold NULL; this stands for "never expires".
NEVER = (1 << 63) - 1
#: sqlite-vec's limit for one vector column.
MAX_DIM = 8192
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


def check_model(db: apsw.Connection, model: str) -> None:
    """``configure``'s refusal for an embedder whose dimension is not known yet (HTTP backends
    learn it from their first reply): only the model name is compared."""
    current = read_space(db)
    if current is None or current.model == model:
        return
    target = read_reindex_target(db)
    if target is not None and target[0] == model:
        return
    raise EmbeddingModelMismatch.between(current.model, current.dim, model)


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
    raise EmbeddingModelMismatch.between(current.model, current.dim, model, dim)


def _start_generation(db: apsw.Connection, old: VectorSpace | None, model: str, dim: int) -> VectorSpace:
    # Generations only grow, also across a store that once had no space.
    last = int(meta.get(db, META_GENERATION) or 0)
    space = VectorSpace(model, dim, last + 1)
    create_table(db, space)
    if old is not None:
        db.execute(f"DROP TABLE IF EXISTS {old.table}")
    db.execute("DELETE FROM vector_copies")  # the old space's copies
    db.execute("UPDATE memories SET vector_gen = NULL WHERE vector_gen IS NOT NULL")
    meta.put(db, META_MODEL, model)
    meta.put(db, META_DIM, str(dim))
    meta.put(db, META_GENERATION, str(space.generation))
    meta.remove(db, META_REINDEX_MODEL, META_REINDEX_DIM)
    return space


def create_table(db: apsw.Connection, space: VectorSpace) -> None:
    """Create ``space``'s vec0 table unless it exists, and give the table a new stamp.  The
    rescoring copies are not in it: they are ``vector_copies``'s (schema m014)."""
    renew_stamps(db, [WHOLE_TABLE])
    db.execute(
        f"""
        CREATE VIRTUAL TABLE IF NOT EXISTS {space.table} USING vec0 (
            memory_rowid INTEGER PRIMARY KEY,
            scope_key TEXT PARTITION KEY,
            expires_at INTEGER,
            disclosure INTEGER,
            learned_chat TEXT,
            coarse BIT[{vector_codec.coarse_bits(space.dim)}],
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
        coarse = vector_codec.coarse(vector)
        db.execute(
            f"INSERT INTO {space.table} (memory_rowid, scope_key, expires_at, disclosure, learned_chat, coarse) "
            "VALUES (?, ?, ?, ?, ?, vec_bit(?))",
            (
                row.rowid,
                row.scope_key,
                NEVER if row.expires_at_ms is None else row.expires_at_ms,
                row.disclosure,
                row.chat_id or "",
                coarse,
            ),
        )
        db.execute(
            "INSERT OR REPLACE INTO vector_copies (memory_rowid, coarse, fine) VALUES (?, ?, ?)",
            (row.rowid, coarse, vector_codec.fine(vector)),
        )
        count += 1
    renew_stamps(db, partitions)
    return count


def set_expiry(db: apsw.Connection, space: VectorSpace, rowid: int, expires_at_ms: int | None) -> None:
    """A memory's expiry changed (pinning clears it): its vec0 row filters on the expiry and
    the in-memory copies read it, so the row follows and its partition gets a new stamp."""
    found = db.execute(f"SELECT scope_key FROM {space.table} WHERE memory_rowid = ?", (rowid,)).fetchone()
    if found is None:
        return
    db.execute(
        f"UPDATE {space.table} SET expires_at = ? WHERE memory_rowid = ?",
        (NEVER if expires_at_ms is None else expires_at_ms, rowid),
    )
    renew_stamps(db, [found[0]])


def delete_vectors(db: apsw.Connection, space: VectorSpace, rowids: Iterable[int]) -> None:
    renew_stamps(db, _delete_rows(db, space, rowids))


def _delete_rows(db: apsw.Connection, space: VectorSpace, rowids: Iterable[int]) -> set[str]:
    """Delete the vectors of ``rowids``; returns the partitions they were in (whose stamps the
    caller renews, once per transaction)."""
    partitions: set[str] = set()
    for rowid in rowids:
        found = db.execute(f"SELECT scope_key FROM {space.table} WHERE memory_rowid = ?", (rowid,)).fetchone()
        if found is not None:
            partitions.add(found[0])
            db.execute(f"DELETE FROM {space.table} WHERE memory_rowid = ?", (rowid,))
        db.execute("DELETE FROM vector_copies WHERE memory_rowid = ?", (rowid,))
    return partitions


def fine_copies(db: apsw.Connection, rowids: Iterable[int]) -> dict[int, bytes]:
    """The rescoring copies of those of ``rowids`` that have a vector, in the order asked."""
    wanted = list(dict.fromkeys(rowids))
    if not wanted:
        return {}
    # One statement: a round trip per rowid costs twice as much (0.5 us a row by primary key).
    return dict(
        db.execute(
            "SELECT w.value, c.fine FROM json_each(?) AS w CROSS JOIN vector_copies AS c ON c.memory_rowid = w.value",
            (json.dumps(wanted),),
        ).fetchall()
    )
