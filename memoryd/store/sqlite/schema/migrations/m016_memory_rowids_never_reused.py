"""Schema step 016: a memory's rowid is never handed out again.

Without AUTOINCREMENT, SQLite gives a new row the highest rowid plus one, so deleting the
newest memory (an erasure, gc, an episode's retention) hands its rowid to the next memory
added, whoever adds it.  Work that named the old memory by its rowid and finishes later (an
embedding or supersession job whose answer comes after the erasure) would then land on the
new one: the vector of one user's text on another user's memory.  The table is not rebuilt
with AUTOINCREMENT (the FTS index, the triggers and every index would have to be recreated);
instead this trigger keeps the highest rowid ever deleted as the newest one in ``meta``
(``memories_rowid_floor``), and ``memories.NEXT_ROWID`` gives each insert a rowid above it.
"""

from __future__ import annotations

import apsw


def m016_memory_rowids_never_reused(db: apsw.Connection) -> None:
    """Idempotent (IF NOT EXISTS): a store whose version was set back runs it again."""
    db.execute(
        """
        -- Only the deletion of the newest row moves the floor (one indexed look-up otherwise).
        CREATE TRIGGER IF NOT EXISTS memories_rowid_floor AFTER DELETE ON memories
        WHEN old.rowid > coalesce((SELECT max(rowid) FROM memories), 0) BEGIN
            INSERT INTO meta (key, value) VALUES ('memories_rowid_floor', old.rowid)
            ON CONFLICT (key) DO UPDATE
            SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER));
        END;
        """
    )
