"""Schema step 014: the copies the searches read live in ``vector_copies``, a table memoryd owns."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

import apsw

from memoryd.store.sqlite.schema.migrations import vector_formats
from memoryd.store.sqlite.schema.migrations.vector_formats import Space

#: Copies converted per numpy call.
_BATCH = 20_000


def m014_owned_vector_copies(db: apsw.Connection) -> None:
    """``vector_copies`` holds each vector's sign bits (read into the in-memory scan copies) and
    its 6-bit rescoring copy, by memory rowid.  Before this step the rescoring copy was an
    auxiliary column of the vec0 table, and the scan copies were read from sqlite-vec's internal
    tables, which sqlite-vec does not promise to keep.  The copies move here (int8 ones, from
    stores that came up the ladder past m012, re-encoded as 6-bit) and the vec0 table is rebuilt
    without the column, so no byte is kept twice but the sign bits vec0 scans itself.  The
    table's stamp is renewed: its rows were rewritten."""
    db.execute(
        """
        CREATE TABLE vector_copies (
            memory_rowid INTEGER PRIMARY KEY,   -- memories.rowid
            coarse BLOB NOT NULL,               -- sign bits, one per dimension
            fine BLOB NOT NULL                  -- the rescoring copy: 6 bits per dimension
        )
        """
    )
    space = vector_formats.read_space(db)
    if space is None:
        return
    exists = db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (space.table,)).fetchone()
    if exists is None:
        return  # `memoryd check --repair` re-creates it and queues the embeddings
    db.executemany(
        "INSERT INTO vector_copies (memory_rowid, coarse, fine) VALUES (?, ?, ?)",
        _copies(db, f"SELECT memory_rowid, coarse, embedding FROM {space.table} ORDER BY memory_rowid", space.dim),
    )
    db.execute(
        "CREATE TEMP TABLE vectors_upgrade AS SELECT memory_rowid, scope_key, expires_at, disclosure, learned_chat "
        f"FROM {space.table}"
    )
    db.execute(f"DROP TABLE {space.table}")
    _create_table(db, space)
    db.execute(
        f"INSERT INTO {space.table} (memory_rowid, scope_key, expires_at, disclosure, learned_chat, coarse) "
        "SELECT v.memory_rowid, v.scope_key, v.expires_at, v.disclosure, v.learned_chat, vec_bit(c.coarse) "
        "FROM temp.vectors_upgrade AS v CROSS JOIN vector_copies AS c ON c.memory_rowid = v.memory_rowid"
    )
    db.execute("DROP TABLE temp.vectors_upgrade")
    db.execute("INSERT OR REPLACE INTO vector_epochs (scope_key, epoch) VALUES ('', random())")


def _create_table(db: apsw.Connection, space: Space) -> None:
    """The vec0 table from this step on: the sign bits for sqlite-vec's own filtered scan only."""
    db.execute(
        f"""
        CREATE VIRTUAL TABLE {space.table} USING vec0 (
            memory_rowid INTEGER PRIMARY KEY,
            scope_key TEXT PARTITION KEY,
            expires_at INTEGER,
            disclosure INTEGER,
            learned_chat TEXT,
            coarse BIT[{vector_formats.coarse_bits(space.dim)}],
            chunk_size = {vector_formats.CHUNK_SIZE}
        )
        """
    )


def _copies(db: apsw.Connection, query: str, dim: int) -> Iterator[tuple[int, bytes, bytes]]:
    """(rowid, sign bits, 6-bit copy) for each row of ``query`` (rowid, sign bits, stored copy),
    int8 copies converted in batches (one numpy call per batch instead of one per copy)."""
    cursor = db.execute(query)
    while batch := list(islice(cursor, _BATCH)):
        old = [i for i, (_, _, blob) in enumerate(batch) if len(blob) == dim]
        new = dict(zip(old, vector_formats.six_bit_from_int8([batch[i][2] for i in old], dim), strict=True))
        for i, (rowid, coarse, blob) in enumerate(batch):
            yield rowid, coarse, new.get(i, blob)
