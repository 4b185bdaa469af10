"""Hybrid retrieval: FTS5 BM25 + vec0 KNN gather candidates, a fitted model ranks them.

Both retrievers are confined to the caller's scopes inside SQL (FTS: the scope token is ANDed
into the MATCH; vec0: the scope is the partition key of the scan), so nobody's memories crowd
out anybody else's.  Their candidates, and the memories added right before and after each
(neighbours.py), are scored by ranking.py from the cosine, the scope-weighted share of query
terms (term_match.py) and the neighbours' features.  A final fetch re-checks scope, deletion
and expiry.

The keyword plan lives in ``keyword.py``, the scoped KNN in ``vectors.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import apsw
import numpy as np
import numpy.typing as npt

from memoryd.store import (
    fts_query,
    keyword,
    memories,
    neighbours,
    people_retriever,
    ranking,
    scope_stats,
    vectors,
)
from memoryd.store.records import SearchHit, hit_from_record
from memoryd.store.term_match import TermWeights
from memoryd.store.visibility import Scope

log = logging.getLogger("memoryd.store")

#: How far around each candidate the ranker reads (the window of ranking.py, plus one step
#: for the neighbours that become candidates themselves).
REACH = ranking.WINDOW + 1
#: Reciprocal rank fusion constant (Cormack et al.), for the people retriever's list.
RRF_K = 60


def candidate_depth(limit: int) -> int:
    """How many candidates each retriever contributes to the fusion."""
    return max(limit, 20)


def coarse_k(depth: int) -> int:
    """Hamming candidates for float rescoring; the vec0 scan cost grows with k."""
    return max(3 * depth, 64)


def _usable_space(
    db: apsw.Connection, query_vector: np.ndarray | None, expected: vectors.VectorSpace | None
) -> vectors.VectorSpace | None:
    """The current space if the query vector can be compared with it, else None (keyword only).

    A vector from another model, or of another length, is never compared: search degrades
    to keywords (with a warning) instead of failing or mixing spaces.
    """
    if query_vector is None or expected is None:
        return None
    space = vectors.read_space(db)
    if space != expected:
        log.warning("search: vector space changed under this process; keyword results only")
        return None
    if query_vector.size != space.dim:
        log.warning(
            "search: query vector has %d dimensions, the store %d; keyword results only", query_vector.size, space.dim
        )
        return None
    return space


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """One search as the store runs it.

    ``vector_space`` is the space ``vector`` belongs to (the one this process configured);
    vectors are used only when it is the store's current space.  ``now_ms`` is the instant
    expiry is judged at."""

    text: str
    limit: int
    vector: np.ndarray | None
    vector_space: vectors.VectorSpace | None
    now_ms: int


@dataclass(frozen=True, slots=True)
class Candidates:
    """Everything ranked for one query: the candidates, their features, the known cosines."""

    rowids: list[int]
    features: npt.NDArray[np.float64]  # one row of ranking.FEATURES per candidate
    cosines: dict[int, float]
    terms: list[str]
    created_at_ms: dict[int, int]  # of the candidates, for ranking.diversify


def candidates(db: apsw.Connection, scope: Scope, query: SearchQuery, extra: Sequence[int] = ()) -> Candidates:
    """Both retrievers' candidates (and ``extra`` ones, e.g. the people retriever's) and their
    neighbours, with the ranking model's features."""
    keys = scope.visible_keys()
    terms = fts_query.extract_terms(query.text)
    limit, now_ms = query.limit, query.now_ms
    depth = candidate_depth(limit)
    measured = [scope_stats.measure(db, key, terms) for key in keys] if terms else []
    counts = [per_term for per_term, _ in measured]
    by_words = keyword.candidates(db, scope, terms, depth, now_ms, counts)

    space = _usable_space(db, query.vector, query.vector_space)
    unit = vectors.normalized(query.vector, space.dim) if space is not None and query.vector is not None else None
    cosines: dict[int, float] = {}
    semantic: list[int] = []
    if space is not None and unit is not None:
        # Every coarse candidate is rescored anyway: keep all their cosines for the neighbours.
        nearest = vectors.knn(db, space, scope, unit, depth=coarse_k(depth), coarse_k=coarse_k(depth), now_ms=now_ms)
        semantic = [rowid for rowid, _ in nearest[:depth]]
        cosines = dict(nearest)

    found = list(dict.fromkeys([*by_words, *semantic, *extra]))
    hood = neighbours.around(db, scope, found, REACH, now_ms)
    pool = [rowid for rowid in found if rowid in hood.rows]
    known = set(pool)
    adjacent = [
        n for rowid in pool for n in (hood.walk(rowid, -1), hood.walk(rowid, 1)) if n is not None and n not in known
    ]
    adjacent = list(dict.fromkeys(adjacent))
    vectors_on = space is not None and unit is not None
    if vectors_on:
        cosines.update(vectors.cosines_for(db, space, [r for r in pool if r not in cosines], unit))

    weights = TermWeights(db, terms, _summed(counts), sum(size for _, size in measured))
    table = ranking.FeatureTable(hood, weights.coverage)
    features = table.matrix(pool, cosines)
    if vectors_on:
        adjacent = _worth_a_cosine(adjacent, features, cosines, table, limit)
        cosines.update(vectors.cosines_for(db, space, [r for r in adjacent if r not in cosines], unit))
    # A neighbour joins the ranking on evidence of its own (a vector, or a query term), never
    # on its neighbour's alone: keyword-only search returns only memories that match.
    joining = [rowid for rowid in adjacent if rowid in cosines or table.coverage(rowid) > 0]
    features = np.vstack([features, table.matrix(joining, cosines)])
    rowids = pool + joining
    created = {rowid: hood.rows[rowid].created_at_ms for rowid in rowids}
    return Candidates(rowids, features, cosines, terms, created)


def _worth_a_cosine(
    adjacent: list[int],
    pool_features: npt.NDArray[np.float64],
    cosines: dict[int, float],
    table: ranking.FeatureTable,
    limit: int,
) -> list[int]:
    """The neighbours that could reach the top ``limit`` even with the best cosine seen so far.

    A vec0 lookup costs ~10-20 us per row, and most neighbours of a big scope's candidates are
    unrelated to the query: scoring them first with that optimistic cosine (the model rises
    with the cosine) spares the lookups of those that cannot place.  The retrievers' best
    cosine bounds a neighbour's only approximately (the KNN's coarse pass is not exact).
    """
    if not adjacent or len(pool_features) < limit:
        return adjacent
    best = max(cosines.values(), default=0.0)
    optimistic = table.matrix(adjacent, dict.fromkeys(adjacent, best))
    bar = np.sort(ranking.scores(pool_features))[-limit]
    return [rowid for rowid, score in zip(adjacent, ranking.scores(optimistic), strict=True) if score >= bar]


def search(
    db: apsw.Connection, scope: Scope, query: SearchQuery, people_focus: people_retriever.PeopleFocus | None = None
) -> list[SearchHit]:
    """``people_focus``: the people the query mentions (a third ranked list) or is filtered to."""
    limit, now_ms = query.limit, query.now_ms
    if limit < 1:
        return []
    by_people = people_retriever.ranking(db, scope, people_focus, candidate_depth(limit), now_ms)
    found = candidates(db, scope, query, extra=by_people)
    scored = dict(zip(found.rowids, ranking.scores(found.features).tolist(), strict=True))
    ranked = ranking.order(scored, found.cosines, guard=ranking.guards(found.terms))
    if by_people:
        # The mentioned people's memories have no feature of their own in the model: their
        # list joins the model's order by reciprocal rank fusion, as it joined BM25 and KNN,
        # and breaks its ties (the query is about those people).
        ranked = [(rowid, scored.get(rowid, 0.0)) for rowid in fuse([by_people, [r for r, _ in ranked]])]
    ranked = ranking.diversify(people_retriever.restrict(db, people_focus, ranked), found.created_at_ms)[:limit]
    records = memories.fetch_visible(db, scope, [rowid for rowid, _ in ranked], now_ms)
    people_retriever.annotate(db, scope, records.values())

    hits: list[SearchHit] = []
    for rowid, score in ranked:
        record = records.get(rowid)
        if record is None:
            continue
        if rowid in found.cosines:
            similarity = min(1.0, max(0.0, found.cosines[rowid]))
        else:
            similarity = fts_query.term_fraction(found.terms, record.content, " ".join(record.subjects))
        hits.append(hit_from_record(record, score, similarity))
    return hits


def fuse(rankings: list[list[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal rank fusion: sum of 1/(k + rank) over the lists, best first (ties: first seen)."""
    scores: dict[int, float] = {}
    for ranked in rankings:
        for rank, rowid in enumerate(ranked, start=1):
            scores[rowid] = scores.get(rowid, 0.0) + 1.0 / (k + rank)
    return [rowid for rowid, _ in sorted(scores.items(), key=lambda item: -item[1])]


def _summed(counts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for per_key in counts:
        for term, count in per_key.items():
            total[term] = total.get(term, 0) + count
    return total
