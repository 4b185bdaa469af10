"""The hybrid search on PostgreSQL: the retrievers' candidates, ranked by the shared model.

A search is one transaction on one connection in pipeline mode: statements that do not need
each other's results are sent together and cost one round trip.  It takes three: (1) BEGIN, the
vector space's generation, the KNN and, per scope key, one statement that counts the terms not
known to be common (``ScopeStats``), ranks the rare ones and, only when they find too few, the
recent window (a query made only of symbols: the scan for its text, ``text_scan.py``); (2) the candidates' neighbourhood with the cosines the ranking reads; (3) the
records of the hits with the people they are about, and COMMIT.  A term first found common
costs one more (its key's statement is sent again, as a common term's).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import psycopg

from memoryd.store import query_terms, ranking, search_rules, symbol_match
from memoryd.store.neighbourhood import Neighbourhood
from memoryd.store.people_records import PeopleFocus
from memoryd.store.postgres import tokens
from memoryd.store.postgres.memories import hide_unseen_successors
from memoryd.store.postgres.search import hit_records, keyword, neighbours, people_retriever, text_scan, vector_search
from memoryd.store.postgres.search.measuring import Measuring
from memoryd.store.postgres.search.scope_stats import ScopeStats
from memoryd.store.records import SearchHit
from memoryd.store.search_rules import REACH, Candidates, candidate_depth
from memoryd.store.term_match import TermWeights
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]
log = logging.getLogger("memoryd.store")


def coarse_k(depth: int) -> int:
    """How many nearest vectors the KNN returns (their cosines all join the ranking)."""
    return max(3 * depth, 64)


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What one search asks (``search``'s arguments but the connection and the scope)."""

    text: str
    limit: int
    unit: npt.NDArray[np.float32] | None
    generation: int | None
    focus: PeopleFocus | None
    now_ms: int
    min_relevance: float
    stats: ScopeStats | None
    adapted: npt.NDArray[np.float32] | None  # the query moved by store/query_adapter.py


def search(
    conn: Conn,
    scope: Scope,
    text: str,
    limit: int,
    unit: npt.NDArray[np.float32] | None,
    generation: int | None,
    focus: PeopleFocus | None,
    now_ms: int,
    min_relevance: float = 0.0,
    stats: ScopeStats | None = None,
    adapted: npt.NDArray[np.float32] | None = None,
) -> list[SearchHit]:
    """Hybrid search as the SQLite engine ranks it; each hit carries ``relevance``
    (store/relevance.py, from the same ranking features), hits below ``min_relevance`` left out.

    With ``unit``, the vectors of ``generation`` are searched when it is still the store's (else
    keyword results only).  ``stats``: what earlier searches learned of the scope keys.
    ``adapted``: the query moved by the query adapter, when it applies to the store's vectors
    (relevance then reads each candidate's cosine with it too, from the same statement)."""
    if limit < 1:
        return []
    query = SearchQuery(text, limit, unit, generation, focus, now_ms, min_relevance, stats, adapted)
    # On a connection in autocommit mode (``Database.run_sync(..., own_transaction=True)``) the
    # search is its own transaction, BEGIN sent with the first statements, COMMIT with the last.
    own = conn.autocommit
    with conn.pipeline():
        if own:
            conn.execute("BEGIN")
        ranked, found, relevant, records = _search(conn, scope, query)
        if own:
            conn.execute("COMMIT")
    # The records were read as the pipeline ended.
    read = hit_records.read(records.fetchall()) if records is not None else {}
    hide_unseen_successors(conn, scope, read.values())
    return search_rules.hits(ranked, read, found, relevant)


def _search(
    conn: Conn, scope: Scope, query: SearchQuery
) -> tuple[search_rules.Ranked, Candidates, dict[int, float], psycopg.Cursor[Any] | None]:
    """The ranked rowids with what their hits are built from: the candidates (their cosines and
    the query's terms), the relevances and the records' statement, sent, not yet read."""
    terms = query_terms.extract_terms(query.text)
    retrieved = _retrieve(conn, scope, query, terms)
    found = _candidates(conn, scope, query, terms, retrieved)
    ranked, relevant = search_rules.rank(found, query.text, retrieved.by_people, query.min_relevance)
    ranked = ranking.diversify(people_retriever.restrict(conn, query.focus, ranked), found.created_at_ms)
    ranked = ranked[: query.limit]

    # Round trip 3: the hits' records, each with the people it is about.
    return ranked, found, relevant, hit_records.send(conn, scope, [rowid for rowid, _ in ranked], query.now_ms)


class _Retrieved(NamedTuple):
    """The retrievers' lists, and what ranking them needs of round trip 1."""

    by_words: list[int]
    by_people: list[int]
    weights: TermWeights
    semantic: bool  # whether the vectors were searched (the query's generation is the store's)
    nearest: list[tuple[int, float]]  # (rowid, cosine), best first
    by_text: list[int]  # a query made only of symbols: the memories holding it, newest first


def _retrieve(conn: Conn, scope: Scope, query: SearchQuery, terms: list[str]) -> _Retrieved:
    """Round trip 1: the generation, the keyword candidates, the KNN (or the sizes that choose
    its plan), and the people retriever's pool."""
    unit, generation, stats, now_ms = query.unit, query.generation, query.stats, query.now_ms
    term_tokens = keyword.term_tokens(terms)
    depth = candidate_depth(query.limit)
    keys = scope.visible_keys()

    current = conn.execute("SELECT value FROM meta WHERE key = 'vector_generation'") if generation is not None else None
    # Each scope key's keyword candidates, its unknown counts measured by the same statement.
    measuring = [Measuring(key, term_tokens, stats) for key in keys] if term_tokens else []
    for each in measuring:
        each.send_ranking(conn, scope, depth, now_ms)
    needle = symbol_match.needle(query.text, terms)
    holding = conn.execute(*text_scan.holding_statement(scope, needle, depth, now_ms)) if needle and keys else None
    focus = query.focus
    people = (
        conn.execute(*people_retriever.people_statement(scope, focus, now_ms))
        if focus is not None and focus.ranked_people
        else None
    )
    bigs: dict[str, bool] = {}
    sizing: dict[str, psycopg.Cursor[Any]] = {}
    nearest_cursor: psycopg.Cursor[Any] | None = None
    if unit is not None and generation is not None:
        for key in keys:
            big = stats.big(key, generation) if stats is not None else None
            if big is None:
                sizing[key] = conn.execute(*vector_search.size_statement(key, generation))
            else:
                bigs[key] = big
        if not sizing:
            nearest_cursor = vector_search.issue_knn(conn, scope, unit, generation, coarse_k(depth), now_ms, bigs)
    semantic = unit is not None and generation is not None
    if current is not None:
        found_generation = current.fetchone()
        if found_generation is None or int(found_generation[0]) != generation:
            log.warning("search: vector space changed under this process; keyword results only")
            semantic, nearest_cursor = False, None
    per_key = [keyword.keyword_hits(each.ranking_rows(conn, scope, depth, now_ms), depth) for each in measuring]
    measured = [each.result() for each in measuring]
    if semantic and sizing:
        assert unit is not None and generation is not None
        for key, cursor in sizing.items():
            (count,) = cursor.fetchone() or (0,)
            bigs[key] = int(count) >= vector_search.HNSW_FROM
            if stats is not None:
                stats.put(bigs[key], "vectors", key, generation, vector_search.HNSW_FROM)
        nearest_cursor = vector_search.issue_knn(conn, scope, unit, generation, coarse_k(depth), now_ms, bigs)

    by_words = keyword.merge_keys(per_key, depth)
    by_people = (
        people_retriever.people_order(people.fetchall(), focus, depth)
        if people is not None and focus is not None
        else []
    )
    summed: dict[str, int] = {}
    for counts, _ in measured:
        for term, count in counts.items():
            summed[term] = summed.get(term, 0) + count
    weights = TermWeights(tokens.tokens, terms, summed, sum(size for _, size in measured))
    nearest = vector_search.nearest(nearest_cursor) if semantic and nearest_cursor is not None else []
    by_text = [int(rowid) for (rowid,) in holding.fetchall()] if holding is not None else []
    return _Retrieved(by_words, by_people, weights, semantic, nearest, by_text)


def _candidates(conn: Conn, scope: Scope, query: SearchQuery, terms: list[str], retrieved: _Retrieved) -> Candidates:
    """Round trip 2: the candidates' neighbourhood, every row with its cosine; the candidates
    with the ranking model's features."""
    depth = candidate_depth(query.limit)
    semantic = retrieved.semantic
    cosines = dict(retrieved.nearest)
    by_vector = [rowid for rowid, _ in retrieved.nearest[:depth]]
    found = list(dict.fromkeys([*retrieved.by_text, *retrieved.by_words, *by_vector, *retrieved.by_people]))
    hood, hood_cosines, hood_adapted = Neighbourhood(centres=set()), dict[int, float](), dict[int, float]()
    if found:
        statement = neighbours.around_statement(
            scope,
            found,
            REACH,
            query.now_ms,
            query.unit if semantic else None,
            query.generation if semantic else None,
            query.adapted if semantic else None,
        )
        hood, hood_cosines, hood_adapted = neighbours.neighbourhood(found, conn.execute(*statement).fetchall())
    pool = [rowid for rowid in found if rowid in hood.rows]
    known = set(pool)
    adjacent = list(
        dict.fromkeys(
            n for rowid in pool for n in (hood.walk(rowid, -1), hood.walk(rowid, 1)) if n is not None and n not in known
        )
    )
    if semantic:
        cosines.update({r: hood_cosines[r] for r in pool if r not in cosines and r in hood_cosines})
    table = ranking.FeatureTable(hood, retrieved.weights.coverage)
    features = table.matrix(pool, cosines)
    if semantic:
        adjacent = search_rules.worth_a_cosine(adjacent, features, cosines, table, query.limit)
        cosines.update({r: hood_cosines[r] for r in adjacent if r not in cosines and r in hood_cosines})
    joining = [rowid for rowid in adjacent if rowid in cosines or table.coverage(rowid) > 0]
    features = np.vstack([features, table.matrix(joining, cosines)])
    rowids = pool + joining
    created = {rowid: hood.rows[rowid].created_at_ms for rowid in rowids}
    texts = {rowid: hood.rows[rowid].text for rowid in rowids}
    # Every candidate with a vector is a centre or a first neighbour: the statement read its
    # adapted cosine beside its plain one.
    adapted = (
        {r: hood_adapted[r] for r in rowids if r in cosines and r in hood_adapted}
        if semantic and query.adapted is not None
        else None
    )
    return Candidates(rowids, features, cosines, terms, created, texts, adapted, retrieved.by_text)
