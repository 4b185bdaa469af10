"""Pinned memories; the indexes the retention pass and max_entries read."""

SQL = """
-- A pinned memory is never evicted, expired or decayed.
ALTER TABLE memories ADD COLUMN pinned boolean NOT NULL DEFAULT false;
-- The retention pass finds old episodes (observed messages kept as memories) without a scan.
CREATE INDEX memories_episodes ON memories (created_at_ms) WHERE memory_type = 'episode';
-- max_entries, checked at every add: episodes are not counted, superseded memories go first.
CREATE INDEX memories_scope_episodes ON memories (scope_key)
    WHERE memory_type = 'episode' AND deleted_at_ms IS NULL;
CREATE INDEX memories_scope_superseded ON memories (scope_key, created_at_ms)
    WHERE superseded_by IS NOT NULL AND deleted_at_ms IS NULL;
"""
