"""The ranking model: a handful of features per candidate memory, weighed by fitted coefficients,
then the order a search returns.

Plain reciprocal rank fusion counts rank 1 of a weak keyword match ("lives" for "What do I do for
a living?") as much as rank 1 of a strong semantic match; a score over the retrievers' *values*
does not.  The features (:mod:`memoryd.store.ranking_features`) are general properties of a
memory and a question, nothing about any particular user; the weights
(:mod:`memoryd.store.ranking_weights`) are a logistic regression fitted on the LoCoMo
development conversations.  This module orders the scored candidates: best first, with a
semantic guard (:func:`order`, :func:`search_order`); after the model's order, :func:`diversify`
gives the last places of the top ten to other episodes.  It re-exports the features and weights,
so that ``ranking.FEATURES``, ``ranking.FeatureTable`` and ``ranking.scores`` read as one model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from memoryd.store.neighbourhood import MAX_GAP_MS
from memoryd.store.ranking_features import FEATURES, WINDOW, FeatureTable, is_question, saturated
from memoryd.store.ranking_weights import WEIGHTS, linear, scores

__all__ = [
    "DIVERSE_FROM",
    "DIVERSE_UNTIL",
    "EPISODE_ROWS",
    "FEATURES",
    "GUARD_MAX_TERMS",
    "SEMANTIC_MARGIN",
    "SPECIFIC_BONUS",
    "WEIGHTS",
    "WINDOW",
    "FeatureTable",
    "asks_specific",
    "diversify",
    "guards",
    "holds_specific",
    "is_question",
    "linear",
    "order",
    "saturated",
    "scores",
    "search_order",
    "shows_exchange",
]

#: How much closer in meaning the best semantic match must be to move above a candidate.
SEMANTIC_MARGIN = 0.05
#: The guard protects queries of at most this many content words.
GUARD_MAX_TERMS = 3
#: Among notes (:func:`search_order`), how much closer in meaning a memory counts when the
#: query asks for a specific (who, where, when, how many...) and the memory holds one (a digit,
#: a capitalised word inside a sentence).  Fitted held out on the fact set (bench/fit_order.py).
SPECIFIC_BONUS = 0.1
#: The first this-many results are the model's best, as scored; the rest of the top
#: DIVERSE_UNTIL each open an episode not shown yet (:func:`diversify`).
DIVERSE_FROM = 6
DIVERSE_UNTIL = 10
#: Memories at most this many rows apart, and added within neighbours.MAX_GAP_MS of each other,
#: belong to one episode (an exchange of a conversation, a burst of notes).
EPISODE_ROWS = 10

#: A question asking for a person, place, time or amount: its answer is a name or a number.
_ASKS_SPECIFIC = re.compile(
    r"^\W*(?:who|whom|whose|where|when|how\s+(?:many|much|old|long|often|far))\b|\bname\b", re.I
)
_DIGIT = re.compile(r"\d")


def guards(terms: Sequence[str], matrix: npt.NDArray[np.float64] | None = None) -> bool:
    """Whether the semantic guard of :func:`order` applies to a query with these terms, whose
    candidates have the rows ``matrix`` of FEATURES (when given).

    Short queries always have it.  So does any query among candidates that show no exchange: no
    candidate asks anything and none follows a question, as among a person's notes added one at
    a time.  The weights come from conversations, and there the neighbour features say which
    turn replies to which; among plain facts a neighbour is just the fact added before, its
    words lift the wrong memory, and only the meaning is to be trusted.
    """
    if len(terms) <= GUARD_MAX_TERMS:
        return True
    return matrix is not None and not shows_exchange(matrix)


def shows_exchange(matrix: npt.NDArray[np.float64]) -> bool:
    """Whether any candidate (a row of FEATURES) asks something or follows a question."""
    asks, after_question = FEATURES.index("is_question"), FEATURES.index("prev_is_question")
    return bool(matrix[:, asks].any() or matrix[:, after_question].any())


def search_order(
    scored: Mapping[int, float],
    cosines: Mapping[int, float],
    terms: Sequence[str],
    matrix: npt.NDArray[np.float64],
    query: str,
    texts: Mapping[int, str],
) -> list[tuple[int, float]]:
    """The order a search returns its candidates in (both engines): :func:`order`, with the
    semantic guard where :func:`guards` gives it.

    Among notes (no candidate shows an exchange) the guard has no margin, and what it reads is
    the cosine plus SPECIFIC_BONUS for a memory holding a specific (a digit, a name-like word:
    :func:`holds_specific`) when the query asks for one (:func:`asks_specific`): the candidate
    closest in meaning comes first.  The model's weights were fitted on conversations, where
    neighbours and shared words carry the evidence; among facts added one at a time they do
    not, and held out on the fact set the cosine alone put the right fact first more often than
    the model did.  The bonus is a cue from the text's shape only: "How old is our kid?" wants
    the fact with a year in it.  ``texts``: the candidates' texts, by rowid.
    """
    if shows_exchange(matrix):
        return order(scored, cosines, guard=guards(terms))
    closeness = dict(cosines)
    if cosines and asks_specific(query):
        # Only a memory within the bonus of the closest can come first by it: the rest are not read.
        bar = max(cosines.values()) - SPECIFIC_BONUS
        for rowid, cosine in cosines.items():
            if cosine > bar and holds_specific(texts.get(rowid, "")):
                closeness[rowid] = cosine + SPECIFIC_BONUS
    return order(scored, closeness, guard=True, margin=0.0)


def asks_specific(query: str) -> bool:
    """Whether the query asks who, where, when, how many/much/old/long/often/far, or a name."""
    return _ASKS_SPECIFIC.search(query) is not None


def holds_specific(text: str) -> bool:
    """Whether the text holds a digit or a name-like word (capitalised, two letters or more,
    not the first word of a sentence or after a colon)."""
    if _DIGIT.search(text):
        return True
    words = text.split()
    for before, word in zip(words, words[1:], strict=False):
        core = word.strip(",.;:!?'\"()")
        if before.endswith((".", ":", "!", "?")) or len(core) < 2:
            continue
        if core[0].isupper() and core.replace("'", "").replace("-", "").isalpha():
            return True
    return False


def order(
    scored: Mapping[int, float],
    cosines: Mapping[int, float],
    *,
    guard: bool = True,
    margin: float = SEMANTIC_MARGIN,
) -> list[tuple[int, float]]:
    """Best first by score; equal scores put the newer memory (the higher rowid) first, so the
    order never depends on the order the retrievers listed the candidates in.

    Then one guard: the candidate closest in meaning (highest cosine) moves above every
    candidate directly ahead of it whose cosine is ``margin`` (SEMANTIC_MARGIN) or more below its own.  The
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
    while target > 0 and cosines.get(ranked[target - 1][0], 0.0) < best_cosine - margin:
        target -= 1
    if target < position:
        ranked.insert(target, (best, ranked[target][1]))
        del ranked[position + 1]
    return ranked


def diversify(ranked: Sequence[tuple[int, float]], created_at_ms: Mapping[int, int]) -> list[tuple[int, float]]:
    """The top DIVERSE_UNTIL of ``ranked`` spread over episodes: after the first DIVERSE_FROM,
    each place goes to the best candidate of an episode none of the places above holds.

    The model scores each memory alone, and the neighbour features lift a whole exchange
    together, so the top ten often hold three or four turns of one or two exchanges.  When those
    are the wrong exchanges, the answer is nowhere in the top ten; a few places for other
    episodes make a first wrong guess cost less (the top places stay the model's own, so the
    first answer does not move).  Candidates passed over follow the top places in their order.
    A candidate without a known creation time is an episode of its own.  A result placed above
    others takes the score of the place it takes, so scores still fall down the list.
    """
    shown = list(ranked[:DIVERSE_FROM])
    for rowid, score in ranked[DIVERSE_FROM:]:
        if len(shown) >= DIVERSE_UNTIL:
            break
        if not any(_one_episode(rowid, other, created_at_ms) for other, _ in shown):
            shown.append((rowid, score))
    placed = {rowid for rowid, _ in shown}
    reordered = [rowid for rowid, _ in shown] + [rowid for rowid, _ in ranked if rowid not in placed]
    return [(rowid, score) for rowid, (_, score) in zip(reordered, ranked, strict=True)]


def _one_episode(first: int, second: int, created_at_ms: Mapping[int, int]) -> bool:
    # Row ids grow with each add, so rows a few ids apart were added one after the other (other
    # scopes' adds in between only make the rule stricter); the time gap splits the episodes of
    # a scope that gets one memory a day.
    one, other = created_at_ms.get(first), created_at_ms.get(second)
    if one is None or other is None:
        return False
    return abs(first - second) <= EPISODE_ROWS and abs(one - other) <= MAX_GAP_MS
