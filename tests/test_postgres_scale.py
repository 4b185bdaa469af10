"""A PostgreSQL store of many scopes: reading rows by rowid alone (a search's candidates, an embed
job's memory, gc's doomed rows) goes through an index on rowid, not through every scope's
entries of the primary key (scope key first), which grew with the whole table."""

from __future__ import annotations

import pytest

from tests.postgres_server import shared

pytest.importorskip("psycopg")

from memoryd.store.postgres import PostgresStore  # noqa: E402

SCOPES, PER_SCOPE = 2000, 5


def test_rows_read_by_rowid_alone_use_a_rowid_index_in_a_store_of_many_scopes() -> None:
    url = shared().fresh_database()
    with PostgresStore(url, pool_size=1) as store:
        store.configure_vector_space("test:model", 4)

        def fill(conn: object) -> list[str]:
            execute = conn.execute  # type: ignore[attr-defined]
            execute(
                "INSERT INTO memories (scope_key, id, content, owner, shared, source, subjects, created_at_ms, "
                "updated_at_ms, confidence, metadata, content_hash, disclosure, terms, term_freqs, doc_len) "
                "SELECT 'u:user' || (i %% %s), 'id' || i, 'memory ' || i, 'user' || (i %% %s), false, 'test', '[]', "
                "i, i, 1.0, '{}', '\\x00'::bytea, 0, ARRAY['memori'], ARRAY[1.0]::real[], 1.0 "
                "FROM generate_series(1, %s) AS i",
                (SCOPES, SCOPES, SCOPES * PER_SCOPE),
            )
            execute(
                "INSERT INTO memory_vectors (scope_key, rowid, generation, embedding) "
                "SELECT scope_key, rowid, 1, '[1,0,0,0]' FROM memories"
            )
            execute("INSERT INTO jobs (scope_key, kind, memory_rowid, due_at_ms, created_at_ms) "
                    "SELECT scope_key, 'embed', rowid, 0, 0 FROM memories")  # fmt: skip
            execute("ANALYZE memories, memory_vectors, jobs")
            rowids = [row[0] for row in execute("SELECT rowid FROM memories WHERE scope_key = 'u:user7'").fetchall()]
            return [
                "\n".join(row[0] for row in execute("EXPLAIN " + sql, (rowids,)).fetchall())
                for sql in (
                    "SELECT id, content FROM memories WHERE rowid = ANY(%s) AND deleted_at_ms IS NULL",
                    "SELECT rowid, embedding FROM memory_vectors WHERE rowid = ANY(%s) AND generation = 1",
                    "SELECT job_id FROM jobs WHERE memory_rowid = ANY(%s)",
                )
            ]

        plans = store.db.run_sync(fill)
    for plan, index in zip(plans, ("memories_rowid", "memory_vectors_rowid", "jobs_memory"), strict=True):
        assert index in plan, plan
