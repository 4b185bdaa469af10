"""The retrievers' parts of a search, each runnable on its own reader.

The keyword part (FTS5 BM25 in ``keyword.py``, the people retriever, the query terms' weights
in the caller's scope) needs no vector, so the daemon gathers it while the query is being
embedded (``overlapped_search.py``); the vector part is the scoped KNN of ``vector_search.py``.
``search.py`` joins the two into the ranked candidates.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import apsw
import numpy as np
import numpy.typing as npt

from memoryd.store import query_adapter, query_terms, symbol_match
from memoryd.store.search_rules import REACH, candidate_depth
from memoryd.store.sqlite.search import keyword, neighbours, people_retriever, scope_stats, text_scan
from memoryd.store.sqlite.search.term_match import term_weights
from memoryd.store.sqlite.vectors import vector_search, vectors
from memoryd.store.term_match import TermWeights
from memoryd.store.visibility import Scope

log = logging.getLogger("memoryd.store")


def coarse_k(depth: int) -> int:
    """Hamming candidates for float rescoring; the vec0 scan cost grows with k."""
    return max(3 * depth, 64)


def usable_space(
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
    #: Hits whose relevance (relevance.py) is below this are left out.
    min_relevance: float = 0.0


@dataclass(frozen=True, slots=True)
class KeywordPart:
    """What a search finds without the query's vector: the query terms, their weights in the
    caller's scope (store/term_match.py), the keyword and people retrievers' lists.  The daemon
    gathers it while the query is being embedded (``overlapped_search.py``)."""

    terms: list[str]
    by_words: list[int]
    by_people: list[int]
    weights: TermWeights
    #: The neighbourhood of by_words and by_people, their texts' coverage measured, when
    #: ``prepare_ranking`` ran (while the reader would otherwise wait for the vector).
    hood: neighbours.Neighbourhood | None = None
    #: A query made only of symbols: the memories holding its text (store/symbol_match.py).
    by_text: list[int] = dataclasses.field(default_factory=list)


def keyword_part(
    db: apsw.Connection, scope: Scope, query: SearchQuery, people_focus: people_retriever.PeopleFocus | None = None
) -> KeywordPart:
    terms = query_terms.extract_terms(query.text)
    depth, now_ms = candidate_depth(query.limit), query.now_ms
    measured = [scope_stats.measure(db, key, terms) for key in scope.visible_keys()] if terms else []
    counts = [per_term for per_term, _ in measured]
    by_words = keyword.candidates(db, scope, terms, depth, now_ms, counts)
    by_people = people_retriever.ranking(db, scope, people_focus, depth, now_ms)
    weights = term_weights(db, terms, _summed(counts), sum(size for _, size in measured))
    needle = symbol_match.needle(query.text, terms)
    by_text = text_scan.holding(db, scope, needle, depth, now_ms) if needle else []
    return KeywordPart(terms, by_words, by_people, weights, by_text=by_text)


def prepare_ranking(db: apsw.Connection, scope: Scope, words: KeywordPart, now_ms: int) -> KeywordPart:
    """``words`` with its candidates' neighbourhood read and their texts' coverage measured:
    work the ranking does anyway, done while the reader would wait for the vector."""
    hood = neighbours.around(db, scope, [*words.by_text, *words.by_words, *words.by_people], REACH, now_ms)
    for row in hood.rows.values():
        words.weights.coverage(row.text)
    return dataclasses.replace(words, hood=hood)


@dataclass(frozen=True, slots=True)
class VectorPart:
    """The KNN retriever's list: (rowid, cosine) best first, the space and unit query it was
    scanned with, and the state of the scope's vectors it saw (``vector_search.scan_state``).
    ``moved``: the query moved by relevance's adapter (None where it does not apply), and
    ``adapted``: each listed row's cosine with it, read with the plain one."""

    space: vectors.VectorSpace
    unit: npt.NDArray[np.float32]
    nearest: list[tuple[int, float]]
    state: tuple[tuple[int, int], ...]
    moved: npt.NDArray[np.float32] | None = None
    adapted: dict[int, float] = dataclasses.field(default_factory=dict)


def vector_part(db: apsw.Connection, scope: Scope, query: SearchQuery) -> VectorPart | None:
    """None when the query has no vector the store's space can compare (keyword-only search)."""
    space = usable_space(db, query.vector, query.vector_space)
    unit = vectors.normalized(query.vector, space.dim) if space is not None and query.vector is not None else None
    if space is None or unit is None:
        return None
    depth = candidate_depth(query.limit)
    # Every coarse candidate is rescored anyway: keep all their cosines for the neighbours.
    state = vector_search.scan_state(db, scope)
    moved = query_adapter.adapted(unit, space.model)
    nearest, adapted = vector_search.knn_with_second(
        db, space, scope, unit, moved, depth=coarse_k(depth), coarse_k=coarse_k(depth), now_ms=query.now_ms, state=state
    )
    return VectorPart(space, unit, nearest, state, moved, adapted)


def _summed(counts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for per_key in counts:
        for term, count in per_key.items():
            total[term] = total.get(term, 0) + count
    return total
