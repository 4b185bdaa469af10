"""Hybrid retrieval: FTS5 BM25 + vec0 KNN gather candidates, a fitted model ranks them.

Both retrievers are confined to the caller's scopes inside SQL (FTS: the scope token is ANDed
into the MATCH; vec0: the scope is the partition key of the scan), so nobody's memories crowd
out anybody else's.  Their candidates, and the memories added right before and after each
(neighbours.py), are scored by ranking.py from the cosine, the scope-weighted share of query
terms (store/term_match.py) and the neighbours' features.  A final fetch re-checks scope, deletion
and expiry.

The retrievers' parts (the keyword plan of ``keyword.py``, the scoped KNN of
``vector_search.py``) are run by ``search_parts.py``; this module joins them into candidates
and ranks those by the rules both engines share (store/search_rules.py).
"""

from __future__ import annotations

import apsw
import numpy as np

from memoryd.store import ranking, search_rules
from memoryd.store.records import SearchHit
from memoryd.store.search_rules import REACH, Candidates, candidate_depth
from memoryd.store.sqlite.memories import memories
from memoryd.store.sqlite.search import neighbours, people_retriever
from memoryd.store.sqlite.search.search_parts import KeywordPart, SearchQuery, VectorPart, keyword_part, vector_part
from memoryd.store.sqlite.vectors import vector_search, vectors
from memoryd.store.visibility import Scope


def candidates(
    db: apsw.Connection,
    scope: Scope,
    query: SearchQuery,
    *,
    words: KeywordPart | None = None,
    semantic: VectorPart | None = None,
) -> Candidates:
    """Both retrievers' candidates (and the people retriever's, ``words.by_people``, and for a
    query made only of symbols the memories holding it, ``words.by_text``) and their
    neighbours, with the ranking model's features.

    ``words`` and ``semantic``: the retrievers' parts when they ran already (in this snapshot,
    or ``semantic`` in another reader's: see ``_comparable``); what is missing runs here."""
    if words is None:
        words = keyword_part(db, scope, query)
    limit, now_ms = query.limit, query.now_ms
    depth = candidate_depth(limit)
    if semantic is None or not _comparable(db, scope, semantic):
        semantic = vector_part(db, scope, query)
    cosines: dict[int, float] = {}
    # Relevance's second cosine, of the query moved by the adapter, read with each plain one.
    adapted: dict[int, float] = {}
    by_vector: list[int] = []
    if semantic is not None:
        space, unit, moved = semantic.space, semantic.unit, semantic.moved
        by_vector = [rowid for rowid, _ in semantic.nearest[:depth]]
        cosines = dict(semantic.nearest)
        adapted = dict(semantic.adapted)

    def measure(rowids: list[int]) -> None:
        plain, second = vector_search.cosines_with_second(
            db, space, [r for r in rowids if r not in cosines], unit, moved
        )
        cosines.update(plain)
        adapted.update(second)

    found = list(dict.fromkeys([*words.by_text, *words.by_words, *by_vector, *words.by_people]))
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
        measure(pool)

    table = ranking.FeatureTable(hood, words.weights.coverage)
    features = table.matrix(pool, cosines)
    if semantic is not None:
        adjacent = search_rules.worth_a_cosine(adjacent, features, cosines, table, limit)
        measure(adjacent)
    # A neighbour joins the ranking on evidence of its own (a vector, or a query term), never
    # on its neighbour's alone: keyword-only search returns only memories that match.
    joining = [rowid for rowid in adjacent if rowid in cosines or table.coverage(rowid) > 0]
    features = np.vstack([features, table.matrix(joining, cosines)])
    rowids = pool + joining
    created = {rowid: hood.rows[rowid].created_at_ms for rowid in rowids}
    texts = {rowid: hood.rows[rowid].text for rowid in rowids}
    seconds = None
    if semantic is not None and moved is not None:
        seconds = {rowid: adapted[rowid] for rowid in rowids if rowid in cosines}
    return Candidates(rowids, features, cosines, words.terms, created, texts, seconds, words.by_text)


def _comparable(db: apsw.Connection, scope: Scope, semantic: VectorPart) -> bool:
    """Whether a KNN list scanned on another reader may join this snapshot's ranking.

    The other reader's snapshot may be a commit or two apart from this one.  Its list is used
    only when the scope's vectors are as this snapshot holds them (same space, same stamps):
    then this snapshot's own scan would give the same list, and the ranking's candidates are
    those of the sequential search.  A vector added or deleted in between (or a reindex) makes
    the scan run again here: a list with a newer memory in it would hold one older candidate
    fewer than this snapshot's scan."""
    # A list exists only for a usable space, whose length the query's was checked against.
    return vectors.read_space(db) == semantic.space and vector_search.scan_state(db, scope) == semantic.state


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
    found = candidates(db, scope, query, words=words, semantic=semantic)
    ranked, relevant = search_rules.rank(found, query.text, words.by_people, query.min_relevance)
    ranked = ranking.diversify(people_retriever.restrict(db, people_focus, ranked), found.created_at_ms)[:limit]
    records = memories.fetch_visible(db, scope, [rowid for rowid, _ in ranked], now_ms)
    people_retriever.annotate(db, scope, records.values())
    return search_rules.hits(ranked, records, found, relevant)
