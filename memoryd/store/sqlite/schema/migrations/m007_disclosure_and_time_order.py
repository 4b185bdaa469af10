"""Schema step 007: the disclosure code column and the time-ordered list index."""

from __future__ import annotations

import apsw

from memoryd.store.sqlite.schema.migrations import vector_formats, vector_table_rebuild

#: The disclosure code of a memory's row, as this step defined the column (``visibility.Disclosure``).
DISCLOSURE_SQL = (
    "(CASE WHEN chat_type IN ('group', 'supergroup') THEN 2 WHEN chat_type = 'private' THEN 1 ELSE 0 END)"
    " + 3 * (sensitivity IS 'sensitive') + 6 * conversation_private"
)


def m007_disclosure_and_time_order(db: apsw.Connection) -> None:
    """Ids no longer sort by time (they are random, see ``ids.py``), so lists walk a time index;
    the disclosure rules read one generated code per memory (``visibility.Disclosure``), which
    the vector table stores too, so its scan can filter by it (the table is rebuilt in place)."""
    db.execute(
        f"""
        ALTER TABLE memories ADD COLUMN disclosure INTEGER GENERATED ALWAYS AS ({DISCLOSURE_SQL}) VIRTUAL;
        -- list (newest first) and its cursor: one ordered walk per scope key.
        CREATE INDEX memories_scope_time ON memories (scope_key, created_at_ms, rowid) WHERE deleted_at_ms IS NULL;
        """
    )
    space = vector_formats.read_space(db)
    if space is not None:
        vector_table_rebuild.rebuild_table(db, space)
