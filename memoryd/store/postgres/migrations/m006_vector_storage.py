"""Vectors inline while the row fits a page, out of line past it."""

SQL = """
-- Vectors stay inline while the row fits a page (out-of-line vectors made exact scans 2x slower),
-- and go out of line, uncompressed, only when it does not: STORAGE PLAIN refused every vector of
-- more than about 2030 dimensions ("row is too big"), OpenAI's 3072 for one.  Both settings
-- change the catalog only: no row is rewritten.
ALTER TABLE memory_vectors ALTER COLUMN embedding SET STORAGE EXTERNAL;
ALTER TABLE memory_vectors SET (toast_tuple_target = 8160);
"""
