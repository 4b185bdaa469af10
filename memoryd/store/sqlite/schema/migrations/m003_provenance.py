"""Schema step 003: where a memory was learned and how it may be disclosed (provenance columns)."""

from __future__ import annotations

import apsw


def m003_provenance(db: apsw.Connection) -> None:
    """Where a memory was learned and how it may be disclosed (see ``records.Provenance``).

    NULL means unknown: memories from before this version have no provenance, and the
    disclosure rules treat unknown as "learned in a private chat" (fail closed).
    """
    db.execute(
        """
        ALTER TABLE memories ADD COLUMN chat_type TEXT;
        ALTER TABLE memories ADD COLUMN source_username TEXT;
        ALTER TABLE memories ADD COLUMN source_display_name TEXT;
        ALTER TABLE memories ADD COLUMN source_message_id TEXT;
        ALTER TABLE memories ADD COLUMN source_session TEXT;
        ALTER TABLE memories ADD COLUMN sensitivity TEXT
            CHECK (sensitivity IS NULL OR sensitivity IN ('public', 'personal', 'sensitive'));
        ALTER TABLE memories ADD COLUMN memory_type TEXT;
        ALTER TABLE memories ADD COLUMN conversation_private INTEGER NOT NULL DEFAULT 0
            CHECK (conversation_private IN (0, 1));
        """
    )
