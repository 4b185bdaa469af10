"""The vector retriever on PostgreSQL: the scoped KNN of pgvector, and the HNSW index it uses.

Exact cosine search, one ``UNION ALL`` branch per visible scope key, each with its own ORDER BY
... LIMIT (a global ANN index with a scope filter lost small scopes' results; an exact scan
through the scope's primary key range loses nothing); a scope key of HNSW_FROM vectors or more
through the HNSW index of its generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from memoryd.store.postgres.search.keyword import Statement
from memoryd.store.postgres.visibility import predicate
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]


#: A scope key with at least this many vectors is searched through the HNSW index of its
#: generation (iterative scans, so the scope filter never starves the result); smaller ones
#: exactly, through the primary key's range of the scope (recall 1.00, and faster there).
HNSW_FROM = 5000
#: The HNSW candidates a scan keeps (pgvector's ef_search; iterative scans go past it as needed).
EF_SEARCH = 100


def hnsw_index(generation: int) -> str:
    return f"memory_vectors_hnsw_{int(generation)}"


def hnsw_definition(generation: int, dim: int) -> str:
    """The HNSW index of ``generation``'s vectors: over the vectors cast to half precision
    (``halfvec`` of their length: the column itself has none), which halves the index and its
    build and makes a scan 2-4x faster for the same recall; the distances a search returns are
    the float32 vectors' own (``_knn_statement``)."""
    return (
        f"CREATE INDEX IF NOT EXISTS {hnsw_index(generation)} ON memory_vectors "
        f"USING hnsw ((embedding::halfvec({int(dim)})) halfvec_cosine_ops) WHERE generation = {int(generation)}"
    )


def size_statement(key: str, generation: int) -> Statement:
    return (
        "SELECT count(*) FROM (SELECT 1 FROM memory_vectors WHERE scope_key = %s AND generation = %s LIMIT %s) AS v",
        (key, generation, HNSW_FROM),
    )


def _big(conn: Conn, key: str, generation: int) -> bool:
    (count,) = conn.execute(*size_statement(key, generation)).fetchone() or (0,)
    return int(count) >= HNSW_FROM


def knn(
    conn: Conn, scope: Scope, unit: npt.NDArray[np.float32], generation: int, k: int, now_ms: int
) -> list[tuple[int, float]]:
    """(rowid, cosine) of the ``k`` nearest visible memories, best first: one branch per visible
    scope key, each with its own ORDER BY ... LIMIT (exact for small keys, HNSW for big ones)."""
    bigs = {key: _big(conn, key, generation) for key in scope.visible_keys()}
    return nearest(issue_knn(conn, scope, unit, generation, k, now_ms, bigs))


def explain_knn(conn: Conn, scope: Scope, unit: npt.NDArray[np.float32], generation: int, k: int, now_ms: int) -> str:
    """The plan ``knn`` runs (tests check the big scopes' branch uses the HNSW index)."""
    bigs = {key: _big(conn, key, generation) for key in scope.visible_keys()}
    sql, bindings = _knn_statement(scope, unit, generation, k, now_ms, bigs)
    approximate = any(bigs.values())
    if approximate:
        conn.execute(*_index_scans(k))
    plan = "\n".join(str(row[0]) for row in conn.execute("EXPLAIN " + sql, bindings))
    if approximate:
        conn.execute(_SORT_AGAIN)
    return plan


def _knn_statement(
    scope: Scope, unit: npt.NDArray[np.float32], generation: int, k: int, now_ms: int, bigs: dict[str, bool]
) -> Statement:
    selects: list[str] = []
    bindings: list[object] = []
    for key in scope.visible_keys():
        where, params = predicate(scope, now_ms=now_ms, key=key)
        order, ordering = "distance", []
        if bigs[key]:
            # The index's own expression (``hnsw_definition``), so the planner can use it; the
            # distance returned is still the float32 vectors'.
            order, ordering = f"v.embedding::halfvec({unit.size}) <=> %s::halfvec({unit.size})", [unit]
        selects.append(
            "(SELECT v.rowid, v.embedding <=> %s AS distance FROM memory_vectors AS v JOIN memories AS m "
            "ON m.scope_key = v.scope_key AND m.rowid = v.rowid "
            f"WHERE v.scope_key = %s AND v.generation = {int(generation)} AND {where} ORDER BY {order} LIMIT %s)"
        )
        bindings += [unit, key, *params, *ordering, k]
    sql = f"SELECT rowid, distance FROM ({' UNION ALL '.join(selects)}) AS near ORDER BY distance, rowid DESC LIMIT %s"
    return sql, (*bindings, k)


def _index_scans(k: int) -> Statement:
    """For a big scope's branch: iterative HNSW scans (the scope filter never starves the
    result; pgvector 0.8), and no sort of the scope's rows instead of the index (the planner
    underestimates the index's selectivity on a filtered scan); for this transaction."""
    return (
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.ef_search', %s, true), set_config('enable_sort', 'off', true)",
        (str(max(EF_SEARCH, min(k, 1000))),),
    )


#: After the KNN: sorts as before for the rest of the transaction.
_SORT_AGAIN = "SELECT set_config('enable_sort', 'on', true)"


def issue_knn(
    conn: Conn,
    scope: Scope,
    unit: npt.NDArray[np.float32],
    generation: int,
    k: int,
    now_ms: int,
    bigs: dict[str, bool],
) -> psycopg.Cursor[Any]:
    """Send the KNN (its settings around it, when a branch uses the index); its cursor, whose
    rows ``nearest`` reads (in pipeline mode, the statements go with the next round trip)."""
    approximate = any(bigs.values())
    if approximate:
        conn.execute(*_index_scans(k))
    cursor = conn.execute(*_knn_statement(scope, unit, generation, k, now_ms, bigs))
    if approximate:
        conn.execute(_SORT_AGAIN)
    return cursor


def nearest(cursor: psycopg.Cursor[Any]) -> list[tuple[int, float]]:
    return [(int(rowid), 1.0 - float(distance)) for rowid, distance in cursor.fetchall()]


def cosines_for(conn: Conn, rowids: Sequence[int], unit: npt.NDArray[np.float32], generation: int) -> dict[int, float]:
    if not rowids:
        return {}
    rows = conn.execute(
        "SELECT rowid, embedding <=> %s FROM memory_vectors WHERE rowid = ANY(%s) AND generation = %s",
        (unit, list(rowids), generation),
    )
    return {int(rowid): 1.0 - float(distance) for rowid, distance in rows}
