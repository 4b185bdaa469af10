"""Indexes of the lookups by rowid alone."""

SQL = """
-- Lookups by rowid alone (a search's candidates and their cosines, an embed job's memory, the
-- rows gc and erasure remove) name no scope key, so the primary keys (scope key first) cannot
-- serve them: each scanned every scope's entries, a cost that grew with the whole table
-- (~170 ms at a million memories) instead of with the rows asked for.
CREATE INDEX memories_rowid ON memories (rowid);
CREATE INDEX memory_vectors_rowid ON memory_vectors (rowid);
CREATE INDEX jobs_memory ON jobs (memory_rowid);
"""
