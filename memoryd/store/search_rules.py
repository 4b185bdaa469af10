"""The steps of a hybrid search that every engine takes the same way, once its candidates are read.

Each engine gathers candidates its own way (SQL, index, round trips): as many from each
retriever, with as many neighbours around each.  From the ranking model's features on, the
rules are these: which neighbours are worth a cosine lookup, the model's order
with the people retriever's list fused in and the relevance floor applied, the ``about`` filter,
and the hits built from the records read last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memoryd.store import query_terms, ranking, relevance, symbol_match
from memoryd.store.fusion import fuse
from memoryd.store.people_records import PeopleFocus
from memoryd.store.records import MemoryRecord, SearchHit, hit_from_record

#: (rowid, score), best first.
Ranked = list[tuple[int, float]]

#: How far around each candidate the ranker reads (the window of ranking.py, plus one step
#: for the neighbours that become candidates themselves).
REACH = ranking.WINDOW + 1


def candidate_depth(limit: int) -> int:
    """How many candidates each retriever contributes to the fusion."""
    return max(limit, 20)


@dataclass(frozen=True, slots=True)
class Candidates:
    """Everything ranked for one query: the candidates, their features, the known cosines and,
    when the query adapter applies to the store's vectors (store/query_adapter.py), each
    candidate's adapted cosine (None when it does not)."""

    rowids: list[int]
    features: npt.NDArray[np.float64]  # one row of ranking.FEATURES per candidate
    cosines: dict[int, float]
    terms: list[str]
    created_at_ms: dict[int, int]  # of the candidates, for ranking.diversify
    texts: dict[int, str]  # of the candidates, for ranking.search_order
    adapted: dict[int, float] | None = None  # of the candidates with a vector, for relevance
    #: A query made only of symbols: the candidates holding its text (store/symbol_match.py).
    holding: Sequence[int] = ()


def worth_a_cosine(
    adjacent: list[int],
    pool_features: npt.NDArray[np.float64],
    cosines: dict[int, float],
    table: ranking.FeatureTable,
    limit: int,
) -> list[int]:
    """The neighbours that could reach the top ``limit`` even with the best cosine seen so far.

    A cosine lookup costs time per row (SQLite: ~10-20 us a vec0 row), and most neighbours of a
    big scope's candidates are unrelated to the query: scoring them first with that optimistic
    cosine (the model rises with the cosine) spares the lookups of those that cannot place.  The
    retrievers' best cosine bounds a neighbour's only approximately (a KNN's coarse pass is not
    exact).
    """
    if not adjacent or len(pool_features) < limit:
        return adjacent
    best = max(cosines.values(), default=0.0)
    optimistic = table.matrix(adjacent, dict.fromkeys(adjacent, best))
    bar = np.sort(ranking.scores(pool_features))[-limit]
    return [rowid for rowid, score in zip(adjacent, ranking.scores(optimistic), strict=True) if score >= bar]


def rank(found: Candidates, text: str, by_people: list[int], min_relevance: float) -> tuple[Ranked, dict[int, float]]:
    """The candidates in the model's order, the people retriever's list ``by_people`` fused in,
    those below ``min_relevance`` left out; with each candidate's relevance.  The candidates
    holding the text of a query made only of symbols (``found.holding``) come first."""
    scored = dict(zip(found.rowids, ranking.scores(found.features).tolist(), strict=True))
    relevant = relevance.by_rowid(found.rowids, found.features, found.cosines, found.adapted)
    ranked = ranking.search_order(scored, found.cosines, found.terms, found.features, text, found.texts)
    if by_people:
        # The mentioned people's memories have no feature of their own in the model: their
        # list joins the model's order by reciprocal rank fusion, as it joined BM25 and KNN,
        # and breaks its ties (the query is about those people).
        # Each place keeps the score of the model's same place, so scores still fall down the list.
        places = sorted((score for _, score in ranked), reverse=True)
        fused = fuse([by_people, [r for r, _ in ranked]])
        places += [0.0] * (len(fused) - len(places))
        ranked = list(zip(fused, places, strict=True))
    ranked, relevant = symbol_match.first(ranked, found.holding, relevant)
    # Below the floor a memory is left out, whoever retrieved it: a person the query names is
    # no reason to return their unrelated memories.
    return relevance.at_least(ranked, relevant, min_relevance), relevant


def restrict(
    focus: PeopleFocus | None, fused: Ranked, linked: Callable[[list[int], list[int]], Iterable[int]]
) -> Ranked:
    """With an ``about`` filter, keep only the fused rowids linked to those people.
    ``linked(people, rowids)``: which of ``rowids`` are linked to any of ``people`` (the engine's
    query of its ``memory_people`` table)."""
    if focus is None or focus.only is None:
        return fused
    if not focus.only or not fused:
        return []
    kept = set(linked(list(focus.only), [rowid for rowid, _ in fused]))
    return [(rowid, score) for rowid, score in fused if rowid in kept]


def hits(
    ranked: Sequence[tuple[int, float]],
    records: Mapping[int, MemoryRecord],
    found: Candidates,
    relevant: Mapping[int, float],
) -> list[SearchHit]:
    """The hits of ``ranked`` whose record the final visible fetch returned.  A hit's similarity
    is its cosine, or without a vector the share of the query's terms its memory holds (of a
    query made only of symbols, which has none: 1 when it holds the query's text)."""
    answered: list[SearchHit] = []
    holding = set(found.holding)
    for rowid, score in ranked:
        record = records.get(rowid)
        if record is None:
            continue
        if rowid in found.cosines:
            similarity = min(1.0, max(0.0, found.cosines[rowid]))
        elif rowid in holding:
            similarity = 1.0
        else:
            similarity = query_terms.term_fraction(found.terms, record.content, " ".join(record.subjects))
        answered.append(hit_from_record(record, score, similarity, relevant.get(rowid, 0.0)))
    return answered
