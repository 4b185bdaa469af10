"""The vec0 table rebuilt with the columns of schema steps m007 and m008 (steps from m009 on never
rebuild it this way: a rebuild would have to renew the table's stamp, ``vector_epochs``)."""

from __future__ import annotations

import apsw

from memoryd.store.sqlite.schema.migrations import vector_formats
from memoryd.store.sqlite.schema.migrations.vector_formats import Space


def create_table(db: apsw.Connection, space: Space) -> None:
    """The vec0 table as m007-m012 kept it: the rescoring copy in an auxiliary column."""
    db.execute(
        f"""
        CREATE VIRTUAL TABLE IF NOT EXISTS {space.table} USING vec0 (
            memory_rowid INTEGER PRIMARY KEY,
            scope_key TEXT PARTITION KEY,
            expires_at INTEGER,
            disclosure INTEGER,
            learned_chat TEXT,
            coarse BIT[{vector_formats.coarse_bits(space.dim)}],
            +embedding BLOB,
            chunk_size = {vector_formats.CHUNK_SIZE}
        )
        """
    )


def rebuild_table(db: apsw.Connection, space: Space) -> int:
    """Re-create ``space``'s table with m007's columns, keeping every vector, rescoring copies as
    int8 (m008's format); returns the vectors copied.  The rows wait in a plain temporary table:
    vec0 does not rename its own tables, so the old table cannot be renamed out of the way.
    Rewriting all rows (rather than updating them in place) also packs the pages: 1M copies
    updated from 768 to 384 bytes left the table as big as before."""

    def int8_format(blob: bytes) -> bytes:
        # float16 copies (2 * dim bytes) were written before schema m008.
        return vector_formats.int8_from_float16([blob], space.dim)[0] if len(blob) == 2 * space.dim else blob

    db.create_scalar_function("memoryd_rescoring_copy", int8_format, 1, deterministic=True)
    try:
        db.execute(
            "CREATE TEMP TABLE vectors_upgrade AS SELECT memory_rowid, scope_key, expires_at, coarse, "
            f"memoryd_rescoring_copy(embedding) AS embedding FROM {space.table}"
        )
    finally:
        db.create_scalar_function("memoryd_rescoring_copy", None)
    db.execute(f"DROP TABLE {space.table}")
    create_table(db, space)
    db.execute(
        f"INSERT INTO {space.table} (memory_rowid, scope_key, expires_at, disclosure, learned_chat, coarse, embedding) "
        "SELECT v.memory_rowid, v.scope_key, v.expires_at, m.disclosure, coalesce(m.chat_id, ''), vec_bit(v.coarse), "
        "v.embedding FROM temp.vectors_upgrade AS v JOIN memories AS m ON m.rowid = v.memory_rowid"
    )
    copied = int(db.changes())
    db.execute("DROP TABLE temp.vectors_upgrade")
    return copied
