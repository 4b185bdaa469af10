"""The ranking model's features: general properties of a candidate memory and the question,
nothing about any particular user (:mod:`memoryd.store.ranking` weighs them).

- ``cosine``: the query vector's cosine with the memory's (0 without vectors);
- ``coverage``: the IDF-weighted share ``c`` of the query's terms the memory holds, IDF measured
  in the caller's own scope (term_match.py), saturated as ``1 - (1 - c)**2`` when the memory
  has a cosine (see :func:`saturated`);
- ``is_question``: the memory itself asks something: a question is a poor answer to a question;
- ``prev_*``/``next_*``: the same for the memories added just before and after (neighbours.py),
  so an answer ranks with the question it replies to, and ``window_coverage``, the best coverage
  within two memories either side.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from memoryd.store.neighbourhood import Neighbourhood

#: The columns of :meth:`FeatureTable.matrix`, in order.
FEATURES = (
    "cosine",
    "coverage",
    "is_question",
    "prev_is_question",
    "prev_coverage",
    "prev_question_coverage",
    "next_coverage",
    "window_coverage",
)
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
        # Keyed by None too, for the look-up of a missing link (``before.get`` of a first row).
        self._index: dict[int | None, int] = {rowid: i for i, rowid in enumerate(rowids)}
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
        has_vector = np.fromiter((rowid in cosines for rowid in rowids), dtype=bool, count=count)
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
                np.where(has_vector, saturated(coverage[own]), coverage[own]),
                question[own],
                question[prev],
                coverage[prev],
                coverage[prev] * question[prev],
                coverage[next_],
                window,
            )
        )


def saturated(coverage: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """A memory's own coverage as the model weighs it: rising, but less and less, to 1.

    Like BM25's saturation of a term's frequency: the first of the query's words a memory holds
    say the most, the last few add little, so a memory sharing two of five words with the query
    is not left far below one sharing all five when it is closer in meaning.  Held out, this
    shape gained a few questions whose right session was missing from the top ten, whatever the
    labels of the fit (bench/fit_ranker.py); a free square term, fitted, bent the curve the same
    way but past its peak, so that more shared words could lower a score.

    Only where the meaning can take over: a candidate without a cosine (keyword-only search, a
    memory not embedded yet) keeps its coverage as it is, since the words are all it has to be
    told apart by, and a memory holding every word of the query must stay clearly above one
    holding half of them.
    """
    saturating: npt.NDArray[np.float64] = coverage * (2.0 - coverage)
    return saturating
