"""The ranking model: a handful of features per candidate memory, weighed by fitted coefficients.

Plain reciprocal rank fusion counts rank 1 of a weak keyword match ("lives" for "What do I do for
a living?") as much as rank 1 of a strong semantic match; a score over the retrievers' *values*
does not.  The features are general properties of a memory and a question, nothing about any
particular user:

- ``cosine``: the query vector's cosine with the memory's (0 without vectors);
- ``coverage``: the IDF-weighted share of the query's terms the memory holds, IDF measured in the
  caller's own scope (term_match.py);
- ``is_question``: the memory itself asks something: a question is a poor answer to a question;
- ``prev_*``/``next_*``: the same for the memories added just before and after (neighbours.py),
  so an answer ranks with the question it replies to, and ``window_coverage``, the best coverage
  within two memories either side.

The weights are a logistic regression fitted with bench/fit_ranker.py on the LoCoMo development
conversations, held out one conversation at a time (the README gives those numbers).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from memoryd.store.neighbours import Neighbourhood

#: Feature -> weight, in the order of feature_matrix's columns.
WEIGHTS: Mapping[str, float] = {
    "cosine": 5.94,
    "coverage": 2.23,
    "is_question": -0.87,
    "prev_is_question": 0.20,
    "prev_coverage": -1.93,
    "prev_question_coverage": 3.20,
    "next_coverage": -0.99,
    "window_coverage": 3.31,
}
FEATURES = tuple(WEIGHTS)
#: How much closer in meaning the best semantic match must be to move above a candidate.
SEMANTIC_MARGIN = 0.05
#: The guard protects queries of at most this many content words.
GUARD_MAX_TERMS = 3
#: Neighbours the window reaches on either side.
WINDOW = 2

#: A trailing parenthetical ("... can you? (photo attached)") does not change what a text asks.
_TRAILING_ASIDE = re.compile(r"\s*\([^()]*\)\s*$")


def is_question(text: str) -> bool:
    text = text.rstrip()
    if text.endswith(")"):
        text = _TRAILING_ASIDE.sub("", text)
    return text.endswith("?")


class FeatureTable:
    """The features of any candidate of a neighbourhood, read from per-row arrays.

    A search reads the facts of every row around its candidates (each candidate's window, and
    the neighbours that become candidates reach one step further), so all rows are described
    once, up front, and the features of a list of candidates are array look-ups through the
    ``before``/``after`` links: no Python loop per candidate and window step.
    """

    def __init__(self, hood: Neighbourhood, coverage: Callable[[str], float]) -> None:
        """``coverage``: the share of the query's terms a text holds (term_match.py)."""
        rowids = list(hood.rows)
        self._index = {rowid: i for i, rowid in enumerate(rowids)}
        # One extra row, "nobody": every edge of a chain links to it, and it links to itself.
        nobody = len(rowids)
        texts = [hood.rows[rowid].text for rowid in rowids]
        self._coverage = np.array([*map(coverage, texts), 0.0])
        self._question = np.array([*map(is_question, texts), False], dtype=np.float64)
        index = self._index
        self._before = np.array([index.get(hood.before.get(r), nobody) for r in rowids] + [nobody], dtype=np.intp)
        self._after = np.array([index.get(hood.after.get(r), nobody) for r in rowids] + [nobody], dtype=np.intp)

    def coverage(self, rowid: int) -> float:
        return float(self._coverage[self._index[rowid]])

    def matrix(self, rowids: Sequence[int], cosines: Mapping[int, float]) -> npt.NDArray[np.float64]:
        """One row of FEATURES per candidate (each a row of the neighbourhood)."""
        count = len(rowids)
        own = np.fromiter((self._index[rowid] for rowid in rowids), dtype=np.intp, count=count)
        cosine = np.fromiter((cosines.get(rowid, 0.0) for rowid in rowids), dtype=np.float64, count=count)
        coverage, question = self._coverage, self._question
        prev, next_ = self._before[own], self._after[own]
        window = np.maximum(coverage[own], np.maximum(coverage[prev], coverage[next_]))
        further_back, further_on = prev, next_
        for _ in range(2, WINDOW + 1):
            further_back, further_on = self._before[further_back], self._after[further_on]
            window = np.maximum(window, np.maximum(coverage[further_back], coverage[further_on]))
        return np.column_stack(
            (
                cosine,
                coverage[own],
                question[own],
                question[prev],
                coverage[prev],
                coverage[prev] * question[prev],
                coverage[next_],
                window,
            )
        )


_WEIGHT_VECTOR = np.array([WEIGHTS[name] for name in FEATURES])


def scores(matrix: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Relevance in 0..1 per row: the logistic of the weighted sum (the fitted intercept is
    left out: it cannot change an order)."""
    linear: npt.NDArray[np.float64] = matrix @ _WEIGHT_VECTOR
    return 1.0 / (1.0 + np.exp(-linear))


def guards(terms: Sequence[str]) -> bool:
    """Whether the semantic guard of :func:`order` applies to a query with these terms."""
    return len(terms) <= GUARD_MAX_TERMS


def order(
    scored: Mapping[int, float], cosines: Mapping[int, float], *, guard: bool = True
) -> list[tuple[int, float]]:
    """Best first by score; equal scores put the newer memory (the higher rowid) first, so the
    order never depends on the order the retrievers listed the candidates in.

    Then one guard: the candidate closest in meaning (highest cosine) moves above every
    candidate directly ahead of it whose cosine is SEMANTIC_MARGIN or more below its own.  The
    weights come from conversations, where a shared word is strong evidence; among a person's
    plain facts a shared word can be a pun ("living" in "lives in Toronto"), and a clearly
    better match in meaning must not lose to it.  It takes the score of the one it passes.
    ``guard`` is for queries of a few words only (see :func:`guards`): with more words, a
    keyword match rests on more than one word and the weights are trusted.
    """
    ranked = sorted(scored.items(), key=lambda item: (-item[1], -item[0]))
    similar = [(cosines[rowid], rowid) for rowid, _ in ranked if rowid in cosines]
    if not similar or not guard:
        return ranked
    best_cosine, best = max(similar)
    position = next(i for i, (rowid, _) in enumerate(ranked) if rowid == best)
    target = position
    while target > 0 and cosines.get(ranked[target - 1][0], 0.0) < best_cosine - SEMANTIC_MARGIN:
        target -= 1
    if target < position:
        ranked.insert(target, (best, ranked[target][1]))
        del ranked[position + 1]
    return ranked
