"""The SQLite backend: apsw, FTS5 and sqlite-vec; every SQL statement memoryd runs on SQLite lives below this package."""
