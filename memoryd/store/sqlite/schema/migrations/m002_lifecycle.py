"""Schema step 002: columns and indexes for the lifecycle: access recording, expiry marking, gc."""

from __future__ import annotations

import apsw


def m002_lifecycle(db: apsw.Connection) -> None:
    """Columns and indexes for the lifecycle: access recording, expiry marking, gc."""
    db.execute(
        """
        -- Search and list hits, flushed in batches (see access.py); eviction prefers the unused.
        ALTER TABLE memories ADD COLUMN access_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE memories ADD COLUMN last_access_ms INTEGER;
        -- When maintenance audited the expiry ('expired' event), so it is audited once.
        ALTER TABLE memories ADD COLUMN expiry_recorded_ms INTEGER;
        -- Id of the memory that replaces this one.  Nothing sets it yet (no update method);
        -- stats count it as its own state and export carries it, so the format stays lossless.
        ALTER TABLE memories ADD COLUMN superseded_by TEXT;

        -- gc: memories deleted or expired before the retention cut-off, found by range scans.
        CREATE INDEX memories_gc_deleted ON memories (deleted_at_ms) WHERE deleted_at_ms IS NOT NULL;
        CREATE INDEX memories_gc_expired ON memories (expires_at_ms) WHERE expires_at_ms IS NOT NULL;
        -- gc prunes the audit trail of memories purged one retention period ago.
        CREATE INDEX events_purged ON events (at_ms) WHERE event = 'purged';
        """
    )
