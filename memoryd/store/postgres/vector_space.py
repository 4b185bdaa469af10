"""The vector space on PostgreSQL: the embedding model, dimension and generation the store's
vectors belong to (``meta``), a reindex to another model, and the generation's HNSW index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from memoryd.errors import EmbeddingModelMismatch
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import schema
from memoryd.store.postgres import search as searching

Conn = psycopg.Connection[Any]

MAX_DIM = 16000


@dataclass(frozen=True)
class VectorSpace:
    model: str
    dim: int
    generation: int


def read_space(conn: Conn) -> VectorSpace | None:
    values = dict(
        conn.execute("SELECT key, value FROM meta WHERE key LIKE 'vector_%%' OR key LIKE 'reindex_%%'").fetchall()
    )
    if "vector_model" not in values:
        return None
    return VectorSpace(values["vector_model"], int(values["vector_dim"]), int(values["vector_generation"]))


def put_meta(conn: Conn, key: str, value: str | None) -> None:
    if value is None:
        conn.execute("DELETE FROM meta WHERE key = %s", (key,))
    else:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


def configure(conn: Conn, model: str, dim: int, now: int) -> tuple[VectorSpace, bool, int]:
    """Record (first time), accept (same) or refuse (different, unless a reindex to exactly
    this model was requested: then a new generation starts and every memory is re-queued);
    (space, whether a generation started, embed jobs queued)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (schema.MIGRATION_LOCK + 1,))
    current = read_space(conn)
    values = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'reindex_%%'").fetchall())
    target = values.get("reindex_model")
    target_dim = values.get("reindex_dim")
    wanted = target == model and (target_dim is None or int(target_dim) == dim)
    if current is not None and not wanted:
        if (current.model, current.dim) == (model, dim):
            return current, False, 0
        raise EmbeddingModelMismatch.between(current.model, current.dim, model, dim)
    last = int((conn.execute("SELECT value FROM meta WHERE key = 'vector_last_generation'").fetchone() or ("0",))[0])
    space = VectorSpace(model, dim, last + 1)
    put_meta(conn, "vector_model", model)
    put_meta(conn, "vector_dim", str(dim))
    put_meta(conn, "vector_generation", str(space.generation))
    put_meta(conn, "vector_last_generation", str(space.generation))
    put_meta(conn, "reindex_model", None)
    put_meta(conn, "reindex_dim", None)
    conn.execute("DELETE FROM memory_vectors WHERE generation <> %s", (space.generation,))
    for (old,) in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_vectors' AND indexname LIKE 'memory_vectors_hnsw_%%' "
        "AND schemaname = current_schema()"
    ).fetchall():
        conn.execute(f"DROP INDEX IF EXISTS {old}")  # our own index names
    # The big scopes' ANN index (searching.HNSW_FROM): partial on this generation.
    conn.execute(searching.hnsw_definition(space.generation, dim))
    queued = job_rows.enqueue_missing(conn, now, reset=True)
    return space, True, queued


def request_reindex(conn: Conn, model: str, dim: int | None) -> None:
    put_meta(conn, "reindex_model", model)
    put_meta(conn, "reindex_dim", None if dim is None else str(int(dim)))


def check_model(conn: Conn, model: str) -> None:
    current = read_space(conn)
    if current is None or current.model == model:
        return
    target = conn.execute("SELECT value FROM meta WHERE key = 'reindex_model'").fetchone()
    if target is not None and target[0] == model:
        return
    raise EmbeddingModelMismatch.between(current.model, current.dim, model)
