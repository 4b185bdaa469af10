"""Relevance: the estimated probability that a memory helps answer the query.

The ranking model (ranking.py) orders candidates; its scores are fitted to order a
conversation's turns, and how high they run depends on the query and on the store, so a
threshold on them means nothing fixed.  Relevance is estimated apart, as a probability, in two
factors:

    relevance = P(something stored answers the query) * P(this memory is the answer | something does)

Both are logistic models (Platt-style: fitted to labels, so their outputs are probabilities).
The first reads the query's best match over all candidates: the best cosine, the best
``standout``, the best ranker sum and the best coverage.  A message that nothing stored is
about ("write a poem about the sea" to a store of personal facts) meets only weak matches,
however many, and every one of its candidates gets a low relevance.  The second reads each
candidate with a vector:

- ``cosine``, and ``cosine_above``, how far it passes COSINE_KNEE: the cosine's term bends
  there, so what one more point of cosine is worth is fitted apart below and above it (the
  relation is not a straight line: above it, how far a memory stands out says more);
- ``standout``: its cosine minus the mean of the PEERS best cosines among the *other*
  candidates (fewer than PEERS others are made up with BACKGROUND, the cosine of an unrelated
  text): a question something answers has one memory well above the rest;
- ``ranker``: the ranking model's weighted sum, neighbours included (in a conversation the
  answer to a question is often a turn that shares nothing with it, found by its neighbour);
- ``coverage``: the memory's own share of the query's terms, as the ranker reads it.

With the local model's vectors (query_adapter.py), both models also read the *adapted cosine*:
the cosine of the stored vector with the query moved by the learned query adapter, fitted to tell
"answers it" from "on the same topic".  The query model reads the best of them (``best_adapted``),
the memory model each candidate's (``adapted``).  Another embedder's vectors have no adapter: their
relevance runs on FALLBACK, the same models without these two columns.

A candidate without a vector (keyword-only search, a memory not embedded yet) gets a third,
one-step model over ``ranker`` (computed with a cosine of 0) and its plain ``coverage``.

The weights come from bench/fit_relevance.py, fitted on short first-person facts
(bench/data/relevance/) and LoCoMo dialogue turns, held out one persona and one conversation at a
time; docs/relevance.md gives the figures.  Nothing in them names a user, word or question: the
features are the same for any store.  Thresholds on relevance: memory.search returns nothing
unless the best candidate reaches SEARCH_GATE, and then drops hits below SEARCH_FLOOR, unless
told otherwise (:func:`at_least`); memory.context injects nothing unless the best reaches its
config's ``[context] min_relevance``, and then what reaches CONTEXT_SHARE of the best
(:func:`for_context`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memoryd.store import ranking

#: How many of the best other candidates a candidate's ``standout`` is measured against.
PEERS = 5
#: The cosine an unrelated text has with a query (the local model's typical value): it stands
#: for the missing others in a scope with fewer than PEERS other candidates.
BACKGROUND = 0.1
#: Where the cosine's term bends (``cosine_above``).
COSINE_KNEE = 0.3
#: memory.search's default floor on each hit: low, so that it drops only clearly unrelated
#: memories and keeps the weaker matches a long conversation's answers are often found among.
SEARCH_FLOOR = 0.00075
#: Whether anything stored is about a query at all is decided once per query, on its best
#: candidate: with a threshold above 0, a search whose best candidate is below this (or below
#: the threshold, if higher) returns nothing (:func:`at_least`).  A message nothing stored is
#: about meets only weak matches; a long conversation's question has a strong one even when its
#: answers lie far down the list, where a per-hit floor this high would lose them.  Both were
#: chosen held out by bench/fit_relevance.py (:func:`choose_search` there; docs/relevance.md).
SEARCH_GATE = 0.0075

#: memory.context, once a message's best memory clears its threshold, also injects the next best
#: that reach this share of the best one's relevance (see :func:`for_context`).
CONTEXT_SHARE = 0.3

Array = npt.NDArray[np.float64]
_PADDING = np.full(PEERS + 1, BACKGROUND)


@dataclass(frozen=True)
class Weights:
    """Each model's weights, feature name -> weight, the intercept last."""

    query: Mapping[str, float]
    memory: Mapping[str, float]
    words: Mapping[str, float]

    @functools.cached_property
    def arrays(self) -> tuple[Array, Array, Array]:
        query, memory, words = (np.array(list(m.values())) for m in (self.query, self.memory, self.words))
        return query, memory, words


#: Fitted by bench/fit_relevance.py on everything, with the adapted cosine (its held-out figures
#: are in docs/relevance.md): for the local model's vectors.
SHIPPED = Weights(
    query={"best_cosine": 18.36, "best_standout": -5.5, "best_ranker": 0.13, "best_coverage": -1.93,
           "best_adapted": 17.44, "intercept": -8.49},
    memory={
        "cosine": 7.92, "standout": 17.57, "ranker": 0.96, "coverage": -1.17, "cosine_above": -17.68,
        "adapted": 3.28, "intercept": -6.63,
    },
    words={"ranker": 0.35, "coverage": 2.27, "intercept": -4.31},
)  # fmt: skip

#: Fitted the same way without the adapted cosine: for vectors the adapter does not apply to
#: (another embedder, another dimension).
FALLBACK = Weights(
    query={"best_cosine": 26.85, "best_standout": -5.65, "best_ranker": 0.19, "best_coverage": -2.26, "intercept": -7.26},
    memory={
        "cosine": 9.67, "standout": 18.58, "ranker": 0.95, "coverage": -1.08, "cosine_above": -18.25,
        "intercept": -6.47,
    },
    words={"ranker": 0.35, "coverage": 2.27, "intercept": -4.31},
)  # fmt: skip


def standout(cosines: Array) -> Array:
    """Each cosine minus the mean of the PEERS best among the others (BACKGROUND fills in)."""
    best = np.sort(np.concatenate((cosines, _PADDING)))[-(PEERS + 1) :]  # the PEERS + 1 best, worst first
    top = float(best[1:].sum())
    # A candidate among the PEERS best is measured against the other PEERS of the best PEERS + 1.
    others = np.where(cosines >= best[1], (top + best[0] - cosines) / PEERS, top / PEERS)
    difference: Array = cosines - others
    return difference


def memory_features(matrix: Array, adapted: Array | None = None) -> Array:
    """The columns of Weights.memory (intercept excluded), for ranking.FEATURES rows that all
    have a vector; with ``adapted`` (each row's adapted cosine) the column of SHIPPED, without
    it those of FALLBACK."""
    cosine = matrix[:, 0]
    out = np.empty((len(matrix), 5 if adapted is None else 6))
    out[:, 0] = cosine
    out[:, 1] = standout(cosine)
    out[:, 2] = ranking.linear(matrix)
    out[:, 3] = matrix[:, 1]
    out[:, 4] = np.maximum(cosine - COSINE_KNEE, 0.0)
    if adapted is not None:
        out[:, 5] = adapted
    return out


def query_features(memory: Array) -> Array:
    """The columns of Weights.query (intercept excluded), from the candidates' memory_features:
    the best of each but ``cosine_above`` (the best cosine says it)."""
    best: Array = memory[:, _QUERY_COLUMNS[: memory.shape[1] - 1]].max(axis=0)
    return best


_QUERY_COLUMNS = [0, 1, 2, 3, 5]


def words_features(matrix: Array) -> Array:
    """The columns of Weights.words (intercept excluded) for rows without a vector (cosine 0,
    plain coverage)."""
    return np.column_stack((ranking.linear(matrix), matrix[:, 1]))


def estimate(
    matrix: Array, has_vector: npt.NDArray[np.bool_], weights: Weights | None = None, adapted: Array | None = None
) -> Array:
    """Relevance in 0..1 per row of ranking.FEATURES (``has_vector``: whether the row's
    cosine is known; ``adapted``: each row's adapted cosine, where it has a vector, when the
    query adapter applies).  ``weights`` by default SHIPPED with ``adapted``, else FALLBACK."""
    if weights is None:
        weights = FALLBACK if adapted is None else SHIPPED
    query, memory, words = weights.arrays
    vectors = int(has_vector.sum())
    if not len(matrix):
        return np.empty(0)
    if vectors == len(matrix):  # the usual case: every candidate has a vector
        x = memory_features(matrix, adapted)
        return _with_vector(x, query, memory)
    out = np.empty(len(matrix))
    if vectors:
        mine = None if adapted is None else adapted[has_vector]
        out[has_vector] = _with_vector(memory_features(matrix[has_vector], mine), query, memory)
    out[~has_vector] = _logistic(words_features(matrix[~has_vector]) @ words[:-1] + words[-1])
    return out


def _with_vector(x: Array, query: Array, memory: Array) -> Array:
    answered = _logistic(query_features(x) @ query[:-1] + query[-1])
    return answered * _logistic(x @ memory[:-1] + memory[-1])


def by_rowid(
    rowids: list[int], matrix: Array, cosines: Mapping[int, float], adapted: Mapping[int, float] | None = None
) -> dict[int, float]:
    """Each candidate's relevance from its row of ranking.FEATURES; a candidate is read as
    having a vector when ``cosines`` holds it (every backend calls this the same way).
    ``adapted``: the adapted cosines (query_adapter.py), None where the adapter does not apply;
    a candidate with a vector but no adapted cosine reads its plain one."""
    has_vector = np.fromiter((rowid in cosines for rowid in rowids), dtype=bool, count=len(rowids))
    extra = None
    if adapted is not None:
        extra = np.fromiter((adapted.get(r, cosines.get(r, 0.0)) for r in rowids), dtype=np.float64, count=len(rowids))
    return dict(zip(rowids, estimate(matrix, has_vector, adapted=extra).tolist(), strict=True))


def at_least(
    ranked: list[tuple[int, float]], relevant: Mapping[int, float], floor: float, gate: float | None = None
) -> list[tuple[int, float]]:
    """``ranked`` without the candidates whose relevance is below ``floor`` (order kept); a
    candidate with no estimate counts as 0.  Nothing at all unless the query clears ``gate``
    (:func:`query_gate`; by default the one a floor above 0 implies)."""
    if not answers_anything(relevant.values(), query_gate(floor) if gate is None else gate):
        return []
    return [(rowid, score) for rowid, score in ranked if relevant.get(rowid, 0.0) >= floor]


def query_gate(floor: float) -> float:
    """The query-level threshold a per-hit ``floor`` comes with: none for 0 (no threshold at
    all), else the higher of the floor and SEARCH_GATE."""
    return 0.0 if floor <= 0 else max(floor, SEARCH_GATE)


def answers_anything(relevances: Iterable[float], gate: float) -> bool:
    """Whether a query's candidates hold anything about it: the best reaches ``gate``."""
    return gate <= 0 or max(relevances, default=0.0) >= gate


def for_context(relevances: Sequence[float], threshold: float, limit: int) -> list[int]:
    """The indices, of candidates in their search order, that memory.context injects.

    Nothing when the best is below ``threshold``: the query factor of relevance says whether
    anything stored answers the message, and that is the decision the threshold makes.  When
    the best clears it, the candidates at least CONTEXT_SHARE of the best one's relevance, at
    most ``limit`` of them.  A paraphrase the embedder matches poorly leaves the right fact
    below the threshold often, but not far below the best: held out, this injected the right
    fact for more questions than one threshold for every memory, and for no more of the
    questions nothing answers (that share only depends on the best).
    """
    if not relevances or max(relevances) < threshold:
        return []
    bar = CONTEXT_SHARE * max(relevances)
    return [i for i, value in enumerate(relevances) if value >= bar][:limit]


def _logistic(linear: Array) -> Array:
    out: Array = 1.0 / (1.0 + np.exp(-linear))
    return out
