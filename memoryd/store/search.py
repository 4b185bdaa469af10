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

import dataclasses
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


@dataclass(frozen=True, slots=True)
class KeywordPart:
    """What a search finds without the query's vector: the query terms, their weights in the
    caller's scope (term_match.py), the keyword and people retrievers' lists.  The daemon
    gathers it while the query is being embedded (``overlapped_search.py``)."""

    terms: list[str]
    by_words: list[int]
    by_people: list[int]
    weights: TermWeights
    #: The neighbourhood of by_words and by_people, their texts' coverage measured, when
    #: ``prepare_ranking`` ran (while the reader would otherwise wait for the vector).
    hood: neighbours.Neighbourhood | None = None


def keyword_part(
    db: apsw.Connection, scope: Scope, query: SearchQuery, people_focus: people_retriever.PeopleFocus | None = None
) -> KeywordPart:
    terms = fts_query.extract_terms(query.text)
    depth, now_ms = candidate_depth(query.limit), query.now_ms
    measured = [scope_stats.measure(db, key, terms) for key in scope.visible_keys()] if terms else []
    counts = [per_term for per_term, _ in measured]
    by_words = keyword.candidates(db, scope, terms, depth, now_ms, counts)
    by_people = people_retriever.ranking(db, scope, people_focus, depth, now_ms)
    weights = TermWeights(db, terms, _summed(counts), sum(size for _, size in measured))
    return KeywordPart(terms, by_words, by_people, weights)


def prepare_ranking(db: apsw.Connection, scope: Scope, words: KeywordPart, now_ms: int) -> KeywordPart:
    """``words`` with its candidates' neighbourhood read and their texts' coverage measured:
    work the ranking does anyway, done while the reader would wait for the vector."""
    hood = neighbours.around(db, scope, [*words.by_words, *words.by_people], REACH, now_ms)
    for row in hood.rows.values():
        words.weights.coverage(row.text)
    return dataclasses.replace(words, hood=hood)


@dataclass(frozen=True, slots=True)
class VectorPart:
    """The KNN retriever's list: (rowid, cosine) best first, the space and unit query it was
    scanned with, and the state of the scope's vectors it saw (``vectors.scan_state``)."""

    space: vectors.VectorSpace
    unit: npt.NDArray[np.float32]
    nearest: list[tuple[int, float]]
    state: tuple[tuple[int, int], ...]


def vector_part(db: apsw.Connection, scope: Scope, query: SearchQuery) -> VectorPart | None:
    """None when the query has no vector the store's space can compare (keyword-only search)."""
    space = _usable_space(db, query.vector, query.vector_space)
    unit = vectors.normalized(query.vector, space.dim) if space is not None and query.vector is not None else None
    if space is None or unit is None:
        return None
    depth = candidate_depth(query.limit)
    # Every coarse candidate is rescored anyway: keep all their cosines for the neighbours.
    state = vectors.scan_state(db, scope)
    nearest = vectors.knn(
        db, space, scope, unit, depth=coarse_k(depth), coarse_k=coarse_k(depth), now_ms=query.now_ms, state=state
    )
    return VectorPart(space, unit, nearest, state)


def candidates(
    db: apsw.Connection,
    scope: Scope,
    query: SearchQuery,
    *,
    words: KeywordPart | None = None,
    semantic: VectorPart | None = None,
) -> Candidates:
    """Both retrievers' candidates (and the people retriever's, ``words.by_people``) and their
    neighbours, with the ranking model's features.

    ``words`` and ``semantic``: the retrievers' parts when they ran already (in this snapshot,
    or ``semantic`` in another reader's: see ``_comparable``); what is missing runs here."""
    if words is None:
        words = keyword_part(db, scope, query)
    limit, now_ms = query.limit, query.now_ms
    depth = candidate_depth(limit)
    if semantic is None or not _comparable(db, scope, semantic, query):
        semantic = vector_part(db, scope, query)
    cosines: dict[int, float] = {}
    by_vector: list[int] = []
    if semantic is not None:
        space, unit = semantic.space, semantic.unit
        by_vector = [rowid for rowid, _ in semantic.nearest[:depth]]
        cosines = dict(semantic.nearest)

    found = list(dict.fromkeys([*words.by_words, *by_vector, *words.by_people]))
    hood = words.hood
    if hood is None:
        hood = neighbours.around(db, scope, found, REACH, now_ms)
    elif rest := [rowid for rowid in found if rowid not in hood.centres]:
        hood = hood.merged(neighbours.around(db, scope, rest, REACH, now_ms))
    pool = [rowid for rowid in found if rowid in hood.rows]
    known = set(pool)
    adjacent = [
        n for rowid in pool for n in (hood.walk(rowid, -1), hood.walk(rowid, 1)) if n is not None and n not in known
    ]
    adjacent = list(dict.fromkeys(adjacent))
    if semantic is not None:
        cosines.update(vectors.cosines_for(db, space, [r for r in pool if r not in cosines], unit))

    table = ranking.FeatureTable(hood, words.weights.coverage)
    features = table.matrix(pool, cosines)
    if semantic is not None:
        adjacent = _worth_a_cosine(adjacent, features, cosines, table, limit)
        cosines.update(vectors.cosines_for(db, space, [r for r in adjacent if r not in cosines], unit))
    # A neighbour joins the ranking on evidence of its own (a vector, or a query term), never
    # on its neighbour's alone: keyword-only search returns only memories that match.
    joining = [rowid for rowid in adjacent if rowid in cosines or table.coverage(rowid) > 0]
    features = np.vstack([features, table.matrix(joining, cosines)])
    rowids = pool + joining
    created = {rowid: hood.rows[rowid].created_at_ms for rowid in rowids}
    return Candidates(rowids, features, cosines, words.terms, created)


def _comparable(db: apsw.Connection, scope: Scope, semantic: VectorPart, query: SearchQuery) -> bool:
    """Whether a KNN list scanned on another reader may join this snapshot's ranking.

    The other reader's snapshot may be a commit or two apart from this one.  Its list is used
    only when the scope's vectors are as this snapshot holds them (same space, same stamps):
    then this snapshot's own scan would give the same list, and the ranking's candidates are
    those of the sequential search.  A vector added or deleted in between (or a reindex) makes
    the scan run again here: a list with a newer memory in it would hold one older candidate
    fewer than this snapshot's scan."""
    return (
        _usable_space(db, query.vector, query.vector_space) == semantic.space
        and vectors.scan_state(db, scope) == semantic.state
    )


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
    db: apsw.Connection,
    scope: Scope,
    query: SearchQuery,
    people_focus: people_retriever.PeopleFocus | None = None,
    *,
    words: KeywordPart | None = None,
    semantic: VectorPart | None = None,
) -> list[SearchHit]:
    """``people_focus``: the people the query mentions (a third ranked list) or is filtered to.
    ``words``, ``semantic``: parts that ran already (``candidates``); ``words`` must have been
    gathered with the same ``people_focus``."""
    limit, now_ms = query.limit, query.now_ms
    if limit < 1:
        return []
    if words is None:
        words = keyword_part(db, scope, query, people_focus)
    by_people = words.by_people
    found = candidates(db, scope, query, words=words, semantic=semantic)
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
