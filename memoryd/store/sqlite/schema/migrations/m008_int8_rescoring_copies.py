"""Schema step 008: the vector table's rescoring copies become int8."""

from __future__ import annotations

import apsw

from memoryd.store.sqlite.schema.migrations import vector_formats, vector_table_rebuild


def m008_int8_rescoring_copies(db: apsw.Connection) -> None:
    """The rescoring copies become int8 (``dim`` bytes) instead of float16 (``2 * dim``): at a
    million memories they were half of the file.  The table is rewritten,
    so its pages are packed; the pages it leaves are free for reuse."""
    space = vector_formats.read_space(db)
    if space is None:
        return
    # m007 rebuilds the table too, and rebuild_table writes int8 copies: a store that
    # came up the ladder through m007 in this same upgrade has int8 copies already.  Every copy
    # is written by one code version, so one row tells.
    row = db.execute(f"SELECT length(embedding) FROM {space.table} LIMIT 1").fetchone()
    if row is not None and row[0] == 2 * space.dim:
        vector_table_rebuild.rebuild_table(db, space)
