"""The vec0 table rebuilt with the current columns: schema steps m007 and m008 only (steps from
m009 on never rebuild it: a rebuild would have to renew the table's stamp, ``vector_epochs``)."""

from __future__ import annotations

import apsw

from memoryd.store.sqlite.vectors import vector_codec, vectors


def rebuild_table(db: apsw.Connection, space: vectors.VectorSpace) -> int:
    """Re-create ``space``'s table with the current columns, keeping every vector (schema
    upgrades), rescoring copies in the current format; returns the vectors copied.  The rows
    wait in a plain temporary table: vec0 does not rename its shadow tables, so the old table
    cannot be renamed out of the way.  Rewriting all rows (rather than updating them in place)
    also packs the pages: 1M copies updated from 768 to 384 bytes left the table as big as before."""

    def current_format(blob: bytes) -> bytes:
        # float16 copies (2 * dim bytes) were written before schema m008.
        return vector_codec.fine_from_float16([blob], space.dim)[0] if len(blob) == 2 * space.dim else blob

    db.create_scalar_function("memoryd_rescoring_copy", current_format, 1, deterministic=True)
    try:
        db.execute(
            "CREATE TEMP TABLE vectors_upgrade AS SELECT memory_rowid, scope_key, expires_at, coarse, "
            f"memoryd_rescoring_copy(embedding) AS embedding FROM {space.table}"
        )
    finally:
        db.create_scalar_function("memoryd_rescoring_copy", None)
    db.execute(f"DROP TABLE {space.table}")
    vectors.create_table(db, space, renew_stamp=False)  # only schema steps before m009 rebuild
    db.execute(
        f"INSERT INTO {space.table} (memory_rowid, scope_key, expires_at, disclosure, learned_chat, coarse, embedding) "
        "SELECT v.memory_rowid, v.scope_key, v.expires_at, m.disclosure, coalesce(m.chat_id, ''), vec_bit(v.coarse), "
        "v.embedding FROM temp.vectors_upgrade AS v JOIN memories AS m ON m.rowid = v.memory_rowid"
    )
    copied = int(db.changes())
    db.execute("DROP TABLE temp.vectors_upgrade")
    return copied
