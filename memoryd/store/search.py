"""Hybrid retrieval: FTS5 BM25 + vec0 KNN, fused with reciprocal rank fusion.

Both retrievers are confined to the caller's scopes inside SQL (FTS: the scope token is ANDed
into the MATCH; vec0: the scope is the partition key of the scan), so nobody's memories crowd
out anybody else's.  A final fetch re-checks scope, deletion and expiry.

The keyword plan lives in ``keyword.py``, the scoped KNN in ``vectors.py``.
"""

from __future__ import annotations

import logging

import apsw
import numpy as np

from memoryd.store import fts_query, keyword, memories, people_retriever, vectors
from memoryd.store.records import SearchHit, hit_from_record
from memoryd.store.visibility import Scope

log = logging.getLogger("memoryd.store")

#: Reciprocal rank fusion constant (Cormack et al.).
RRF_K = 60


def candidate_depth(limit: int) -> int:
    """How many candidates each retriever contributes to the fusion."""
    return max(2 * limit, 20)


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


def fuse(rankings: list[list[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: sum of 1/(k + rank) over the lists, best first.

    Ties keep the order of first appearance (keyword list first), which is deterministic.
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, rowid in enumerate(ranking, start=1):
            scores[rowid] = scores.get(rowid, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


def search(
    db: apsw.Connection,
    scope: Scope,
    query: str,
    *,
    limit: int,
    query_vector: np.ndarray | None,
    vector_space: vectors.VectorSpace | None,
    now_ms: int,
    people_focus: people_retriever.PeopleFocus | None = None,
) -> list[SearchHit]:
    """``vector_space`` is the space the query vector belongs to (the one this process
    configured); vectors are used only when it is the store's current space.
    ``people_focus``: the people the query mentions (a third ranked list) or is filtered to."""
    if limit < 1:
        return []
    terms = fts_query.extract_terms(query)
    depth = candidate_depth(limit)
    by_words = keyword.candidates(db, scope, terms, depth, now_ms)

    space = _usable_space(db, query_vector, vector_space)
    unit = vectors.normalized(query_vector, space.dim) if space is not None and query_vector is not None else None
    cosines: dict[int, float] = {}
    semantic: list[int] = []
    if space is not None and unit is not None:
        nearest = vectors.knn(db, space, scope, unit, depth=depth, coarse_k=coarse_k(depth), now_ms=now_ms)
        semantic = [rowid for rowid, _ in nearest]
        cosines = dict(nearest)

    by_people = people_retriever.ranking(db, scope, people_focus, depth, now_ms)
    fused = people_retriever.restrict(db, people_focus, fuse([by_words, semantic, by_people]))[:limit]
    records = memories.fetch_visible(db, scope, [rowid for rowid, _ in fused], now_ms)
    people_retriever.annotate(db, scope, records.values())
    if space is not None and unit is not None:
        missing = [rowid for rowid, _ in fused if rowid not in cosines and rowid in records]
        cosines.update(vectors.cosines_for(db, space, missing, unit))

    hits: list[SearchHit] = []
    for rowid, score in fused:
        record = records.get(rowid)
        if record is None:
            continue
        if rowid in cosines:
            similarity = min(1.0, max(0.0, cosines[rowid]))
        else:
            similarity = fts_query.term_fraction(terms, record.content, " ".join(record.subjects))
        hits.append(hit_from_record(record, score, similarity))
    return hits
