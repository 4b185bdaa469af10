"""Schema step 005: supersession columns, the upsert key, and the attribute index the rules read."""

from __future__ import annotations

import apsw


def m005_supersession(db: apsw.Connection) -> None:
    """Supersession (see ``supersession.py``): when and why a memory was replaced, the caller's
    upsert key, and the attribute keys the offline rules compare.

    A superseded memory keeps its row and FTS entry (audit, ``include_superseded``) but loses its
    vector, so the vec0 scan is never crowded by outdated memories.
    """
    db.execute(
        """
        ALTER TABLE memories ADD COLUMN superseded_at_ms INTEGER;
        ALTER TABLE memories ADD COLUMN supersede_reason TEXT;
        -- navi's (category, key) upsert: same key, subjects and scope, newer wins.
        ALTER TABLE memories ADD COLUMN key TEXT;

        -- history walks the chain both ways: "who replaced X" is X.superseded_by, "whom did X
        -- replace" needs this index.
        CREATE INDEX memories_superseded_by ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
        -- gc of superseded memories past retention.
        CREATE INDEX memories_gc_superseded ON memories (superseded_at_ms) WHERE superseded_at_ms IS NOT NULL;
        CREATE INDEX memories_key ON memories (scope_key, key)
            WHERE key IS NOT NULL AND deleted_at_ms IS NULL AND superseded_by IS NULL;

        -- The attribute keys a memory sets (knowledge.attributes: "favorite:color", "employer"),
        -- so the offline candidates of a new memory are one index range per key.
        CREATE TABLE memory_attributes (
            scope_key TEXT NOT NULL,
            attribute TEXT NOT NULL,
            memory_rowid INTEGER NOT NULL REFERENCES memories (rowid) ON DELETE CASCADE,
            PRIMARY KEY (scope_key, attribute, memory_rowid)
        ) WITHOUT ROWID;
        CREATE INDEX memory_attributes_memory ON memory_attributes (memory_rowid);
        """
    )
