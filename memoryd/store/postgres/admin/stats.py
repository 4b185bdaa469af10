"""What is in the store on PostgreSQL (`memoryd stats`): the SQLite engine's report, counted
with PostgreSQL's SQL, and the database's size in place of the files'."""

from __future__ import annotations

from typing import Any

import msgspec
import psycopg

from memoryd.store.maintenance_rules import StateTally
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import schema

Conn = psycopg.Connection[Any]

#: A memory's state; the first that applies wins (a deleted superseded memory is deleted).
STATE_SQL = (
    "CASE WHEN deleted_at_ms IS NOT NULL THEN 'deleted' WHEN superseded_by IS NOT NULL THEN 'superseded' "
    "WHEN expires_at_ms IS NOT NULL AND expires_at_ms <= %s THEN 'expired' ELSE 'active' END"
)


def collect(conn: Conn, now_ms: int) -> dict[str, Any]:
    tally = StateTally()
    tally.add(
        conn.execute(
            f"SELECT owner, shared, source, {STATE_SQL} AS state, count(*) FROM memories GROUP BY 1, 2, 3, 4",
            (now_ms,),
        )
    )
    (chats,) = conn.execute(
        "SELECT count(DISTINCT chat_id) FROM memories WHERE shared AND deleted_at_ms IS NULL"
    ).fetchone() or (0,)
    accessed, hits = conn.execute(
        "SELECT count(*), coalesce(sum(access_count), 0) FROM memories WHERE access_count > 0"
    ).fetchone() or (0, 0)
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    generation = meta.get("vector_generation")
    (embedded,) = conn.execute(
        "SELECT count(*) FROM memory_vectors WHERE generation = %s", (int(generation) if generation else -1,)
    ).fetchone() or (0,)
    (failing,) = conn.execute("SELECT count(*) FROM jobs WHERE attempts > 0").fetchone() or (0,)
    (last_error,) = conn.execute("SELECT max(last_error) FROM jobs WHERE last_error IS NOT NULL").fetchone() or (None,)
    (size,) = conn.execute("SELECT pg_database_size(current_database())").fetchone() or (0,)
    from memoryd.store.postgres.conversations import status

    reindex = meta.get("reindex_model")
    if reindex is not None and meta.get("reindex_dim"):
        reindex = f"{reindex} (dim {meta['reindex_dim']})"
    last = meta.get("maintenance_last")
    return {
        "schema_version": schema.schema_version(conn),
        **tally.report(chats=chats, accessed=accessed, hits=hits),
        "embedding": {
            "model": meta.get("vector_model"),
            "dim": int(meta["vector_dim"]) if "vector_dim" in meta else None,
            "generation": int(generation) if generation else None,
            "embedded": int(embedded),
            "reindex_requested": reindex,
        },
        "backlog": {**job_rows.backlog(conn), "failing": int(failing), "last_error": last_error},
        "extraction": status(conn),
        # The shape of the SQLite backend's (the server's WAL is its own business: 0 here).
        "database": {
            "engine": "postgres",
            "path": "PostgreSQL " + str(conn.info.dbname),
            "bytes": int(size),
            "file": int(size),
            "wal": 0,
        },
        "pages": {"page_size": 8192, "pages": int(size) // 8192, "free_pages": 0},
        "last_maintenance": None if last is None else msgspec.json.decode(last),
    }
