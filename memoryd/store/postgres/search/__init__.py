"""Hybrid search on PostgreSQL: keyword and vector candidates, ranked by the shared model.

The candidate rules, features and model are the SQLite backend's (``store/ranking.py``,
``store/search_rules.py``, the same tokens and term weights):

- keyword candidates (``keyword.py``, their counts in ``measuring.py``): per visible scope key,
  the matches of any query term, BM25-scored with FTS5's formula; a scope whose terms are all
  common ranks only its newest matches;
- vector candidates (``vector_search.py``): exact cosine search per visible scope key, through
  the HNSW index for big ones;
- the neighbours of each candidate (``neighbours.py``), the ranking model's features, the
  semantic guard, the people retriever's list fused in (``people_retriever.py``),
  diversification (``hybrid.py``); the hits' records (``hit_records.py``).

What earlier searches learned of each scope key is kept in ``ScopeStats`` (``scope_stats.py``).
"""

from __future__ import annotations

from memoryd.store.postgres.search.hybrid import coarse_k, search
from memoryd.store.postgres.search.keyword import (
    COMMON_DOCS,
    RECENT_WINDOW,
    keyword_hits,
    keyword_statement,
    merge_keys,
)
from memoryd.store.postgres.search.measuring import Measuring, measure
from memoryd.store.postgres.search.neighbours import around
from memoryd.store.postgres.search.people_retriever import RANK_POOL, annotate, people_ranking, restrict
from memoryd.store.postgres.search.scope_stats import ScopeStats
from memoryd.store.postgres.search.vector_search import (
    EF_SEARCH,
    HNSW_FROM,
    cosines_for,
    explain_knn,
    hnsw_definition,
    hnsw_index,
    knn,
)

__all__ = [
    "COMMON_DOCS",
    "EF_SEARCH",
    "HNSW_FROM",
    "RANK_POOL",
    "RECENT_WINDOW",
    "Measuring",
    "ScopeStats",
    "annotate",
    "around",
    "coarse_k",
    "cosines_for",
    "explain_knn",
    "hnsw_definition",
    "hnsw_index",
    "keyword_hits",
    "keyword_statement",
    "knn",
    "measure",
    "merge_keys",
    "people_ranking",
    "restrict",
    "search",
]
