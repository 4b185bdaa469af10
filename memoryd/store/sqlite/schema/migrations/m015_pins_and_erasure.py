"""Schema step 015: pinned memories, and an FTS index that erases what it deletes.

* ``memories.pinned``: a pinned memory is never evicted, expired or decayed.
* ``memories_scope_episodes``, ``memories_scope_superseded``: an add checks its scope's cap
  (max_entries) with index-only counts and finds the superseded memories to evict first.
* ``memories_episodes``: the retention pass finds old episodes (observed messages kept as
  memories of type ``episode``) without a scan.
* FTS5's ``secure-delete`` option: a deleted row's terms leave the index's pages at once
  instead of staying in old segments behind a delete marker until the next merge (SQLite 3.42+),
  so an erased memory's words are gone from the file (with ``PRAGMA secure_delete`` on the
  connection, which zeroes freed pages and cells).
"""

from __future__ import annotations

import apsw


def m015_pins_and_erasure(db: apsw.Connection) -> None:
    columns = {row[1] for row in db.execute("PRAGMA table_info(memories)")}
    if "pinned" not in columns:
        db.execute("ALTER TABLE memories ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
    db.execute("CREATE INDEX IF NOT EXISTS memories_episodes ON memories (created_at_ms) WHERE memory_type = 'episode'")
    # max_entries, checked at every add: episodes are not counted, superseded memories go first.
    db.execute(
        "CREATE INDEX IF NOT EXISTS memories_scope_episodes ON memories (scope_key) "
        "WHERE memory_type = 'episode' AND deleted_at_ms IS NULL"
    )
    db.execute(
        "CREATE INDEX IF NOT EXISTS memories_scope_superseded ON memories (scope_key, created_at_ms) "
        "WHERE superseded_by IS NOT NULL AND deleted_at_ms IS NULL"
    )
    db.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 1)")
