"""Hybrid retrieval: FTS5 BM25 + vec0 KNN, fused with reciprocal rank fusion.

Both retrievers are confined to the caller's scopes inside SQL (FTS: the scope token is ANDed
into the MATCH; vec0: the scope is the partition key of the scan), so nobody's memories crowd
out anybody else's.  A final fetch re-checks scope, deletion and expiry.

Keeping FTS5 fast when one scope holds ~100k memories: FTS5 scores every document a query
matches (no WAND-style skipping), and a word such as "the" matches nearly all of them.  So:

1. each query term's document count *within the scope* is measured, capped at COMMON_DOCS;
2. if no term reaches the cap (every small scope), the full OR query runs: exact BM25;
3. otherwise the rare terms run alone (common terms have near-zero IDF, so they barely move
   BM25 anyway), and if that yields fewer than ``depth`` hits the full query runs over the
   newest RECENT_WINDOW matches only, its hits ranked after the rare-term hits.
"""

from __future__ import annotations

import apsw
import numpy as np

from memoryd.store import fts_query, memories, vectors
from memoryd.store.records import Scope, SearchHit, hit_from_record

#: Reciprocal rank fusion constant (Cormack et al.).
RRF_K = 60
#: A term matching at least this many of the scope's documents counts as common.
COMMON_DOCS = 1000
#: With only common terms, BM25 ranks the newest this-many matches.
RECENT_WINDOW = 5000
#: Weights of the FTS columns (content, subjects, scope_token) in BM25.
_BM25 = "bm25(memories_fts, 1.0, 0.5, 0.0)"


def candidate_depth(limit: int) -> int:
    """How many candidates each retriever contributes to the fusion."""
    return max(2 * limit, 20)


def coarse_k(depth: int) -> int:
    """Hamming candidates for float rescoring; the vec0 scan cost grows with k."""
    return max(3 * depth, 64)


def _bm25_ranked(
    db: apsw.Connection, keys: list[str], expression: str, depth: int, now_ms: int, min_rowid: int = 0
) -> list[int]:
    placeholders = ", ".join("?" * len(keys))
    rows = db.execute(
        f"""
        SELECT f.rowid, {_BM25} AS score
        FROM memories_fts AS f JOIN memories AS m ON m.rowid = f.rowid
        WHERE memories_fts MATCH ? AND f.rowid >= ?
          AND m.scope_key IN ({placeholders}) AND m.deleted_at_ms IS NULL
          AND (m.expires_at_ms IS NULL OR m.expires_at_ms > ?)
        ORDER BY score, f.rowid DESC
        LIMIT ?
        """,
        (expression, min_rowid, *keys, now_ms, depth),
    )
    return [rowid for rowid, _score in rows]


def _capped_doc_count(db: apsw.Connection, expression: str, cap: int) -> int:
    row = db.execute(
        "SELECT count(*) FROM (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)",
        (expression, cap),
    ).fetchone()
    return int(row[0])


def keyword_candidates(db: apsw.Connection, keys: list[str], terms: list[str], depth: int, now_ms: int) -> list[int]:
    """Rowids of the caller's memories matching any term, best BM25 first."""
    if not terms:
        return []
    tokens = [fts_query.scope_token(key) for key in keys]
    counts = {t: _capped_doc_count(db, fts_query.match_expression(tokens, [t]), COMMON_DOCS) for t in terms}
    present = [t for t in terms if counts[t] > 0]
    if not present:
        return []
    rare = [t for t in present if counts[t] < COMMON_DOCS]
    if len(rare) == len(present):
        return _bm25_ranked(db, keys, fts_query.match_expression(tokens, present), depth, now_ms)
    hits = _bm25_ranked(db, keys, fts_query.match_expression(tokens, rare), depth, now_ms) if rare else []
    if len(hits) >= depth:
        return hits
    full = fts_query.match_expression(tokens, present)
    # rowids grow with time: the RECENT_WINDOW-th newest match bounds the window.
    bound = db.execute(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
        (full, RECENT_WINDOW - 1),
    ).fetchone()
    recent = _bm25_ranked(db, keys, full, depth, now_ms, min_rowid=bound[0] if bound else 0)
    seen = set(hits)
    return hits + [rowid for rowid in recent if rowid not in seen][: depth - len(hits)]


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
    now_ms: int,
) -> list[SearchHit]:
    if limit < 1:
        return []
    keys = scope.keys()
    terms = fts_query.extract_terms(query)
    depth = candidate_depth(limit)
    keyword = keyword_candidates(db, keys, terms, depth, now_ms)

    space = vectors.read_space(db) if query_vector is not None else None
    unit = vectors.normalized(query_vector, space.dim) if space is not None else None
    cosines: dict[int, float] = {}
    semantic: list[int] = []
    if space is not None and unit is not None:
        nearest = vectors.knn(db, space, keys, unit, depth=depth, coarse_k=coarse_k(depth), now_ms=now_ms)
        semantic = [rowid for rowid, _ in nearest]
        cosines = dict(nearest)

    fused = fuse([keyword, semantic])[:limit]
    records = memories.fetch_visible(db, scope, [rowid for rowid, _ in fused], now_ms)
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
