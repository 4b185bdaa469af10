"""A search's candidates' neighbours on PostgreSQL: the memories added right before and after
each one in its scope key (``store/neighbourhood.py``), read in one statement; in a search, with
the cosines the ranking reads.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import psycopg

from memoryd.store.neighbourhood import Neighbourhood, Row
from memoryd.store.postgres.search.keyword import Statement
from memoryd.store.postgres.visibility import predicate
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]
_decode = msgspec.json.decode


def text(content: str, subjects: str) -> str:
    if not subjects or subjects == "[]":
        return content
    return " ".join([content, *_decode(subjects)])


def around_statement(
    scope: Scope,
    wanted: list[int],
    reach: int,
    now_ms: int,
    unit: npt.NDArray[np.float32] | None,
    generation: int | None,
    adapted: npt.NDArray[np.float32] | None = None,
) -> Statement:
    near_sql, near_params = predicate(scope, "s", now_ms=now_ms)
    centre_sql, centre_params = predicate(scope, "c", now_ms=now_ms)
    sql = (
        "SELECT c.rowid AS centre, c.scope_key, n.rowid, n.content, n.subjects, n.created_at_ms, n.side "
        "FROM memories AS c CROSS JOIN LATERAL ("
        "(SELECT s.rowid, s.content, s.subjects, s.created_at_ms, -1 AS side FROM memories AS s "
        f"WHERE s.scope_key = c.scope_key AND {near_sql} AND (s.created_at_ms, s.rowid) < (c.created_at_ms, c.rowid) "
        "ORDER BY s.created_at_ms DESC, s.rowid DESC LIMIT %s) UNION ALL "
        "(SELECT s.rowid, s.content, s.subjects, s.created_at_ms, 1 FROM memories AS s "
        f"WHERE s.scope_key = c.scope_key AND {near_sql} AND (s.created_at_ms, s.rowid) > (c.created_at_ms, c.rowid) "
        "ORDER BY s.created_at_ms, s.rowid LIMIT %s) UNION ALL "
        "SELECT c.rowid, c.content, c.subjects, c.created_at_ms, 0) AS n "
        f"WHERE c.rowid = ANY(%s) AND {centre_sql}"
    )
    params = (*near_params, reach, *near_params, reach, wanted, *centre_params)
    if unit is None or generation is None:
        return f"SELECT centre, rowid, content, subjects, created_at_ms, NULL, NULL FROM ({sql}) AS h", params
    # The cosines the ranking can read come with the rows: each candidate's and those of the
    # rows right before and after it (the ones it may join, ``search_rules.worth_a_cosine``);
    # with ``adapted`` (the query moved by store/query_adapter.py), relevance's second cosine too.
    wanted_row = (
        "h.side = 0 OR row_number() OVER (PARTITION BY h.centre, h.side "
        "ORDER BY h.side * h.created_at_ms, h.side * h.rowid) = 1"
    )
    vector = (
        "FROM memory_vectors AS v WHERE v.scope_key = h.scope_key "
        f"AND v.rowid = h.rowid AND v.generation = {int(generation)}"
    )
    first = f"CASE WHEN {wanted_row} THEN (SELECT v.embedding <=> %s {vector}) END"
    second = "NULL" if adapted is None else first
    queries = (unit,) if adapted is None else (unit, adapted)
    return (
        f"SELECT h.centre, h.rowid, h.content, h.subjects, h.created_at_ms, {first}, {second} FROM ({sql}) AS h",
        (*queries, *params),
    )


def neighbourhood(
    wanted: list[int], rows: Sequence[Sequence[Any]]
) -> tuple[Neighbourhood, dict[int, float], dict[int, float]]:
    """The neighbourhood, the rows' cosines and their adapted cosines (those the statement read)."""
    hood = Neighbourhood(centres=set(wanted))
    cosines: dict[int, float] = {}
    adapted: dict[int, float] = {}
    chains: dict[int, list[tuple[int, int]]] = {}
    for centre, rowid, content, subjects, created, distance, moved in rows:
        rowid = int(rowid)
        if rowid not in hood.rows:
            hood.rows[rowid] = Row(rowid, text(content, subjects), int(created))
        if distance is not None:
            cosines[rowid] = 1.0 - float(distance)
        if moved is not None:
            adapted[rowid] = 1.0 - float(moved)
        chains.setdefault(int(centre), []).append((int(created), rowid))
    for chain in chains.values():
        chain.sort()
        for (_, first), (_, second) in itertools.pairwise(chain):
            hood.link(hood.rows[first], hood.rows[second])
    return hood, cosines, adapted


def around(conn: Conn, scope: Scope, rowids: Sequence[int], reach: int, now_ms: int) -> Neighbourhood:
    """The rows ``scope`` sees within ``reach`` positions of each of ``rowids`` in its scope key."""
    wanted = list(dict.fromkeys(rowids))
    if not wanted:
        return Neighbourhood(centres=set())
    rows = conn.execute(*around_statement(scope, wanted, reach, now_ms, None, None)).fetchall()
    return neighbourhood(wanted, rows)[0]
