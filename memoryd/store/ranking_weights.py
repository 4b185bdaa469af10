"""The ranking model's fitted weights and its score: a logistic regression over the features of
:mod:`memoryd.store.ranking_features`, fitted with bench/fit_ranker.py on the LoCoMo development
conversations, held out one conversation at a time (the README gives those numbers).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from memoryd.store.ranking_features import FEATURES

#: Feature -> weight, in the order of FEATURES (the feature matrix's columns).
WEIGHTS: Mapping[str, float] = {
    "cosine": 3.72,
    "coverage": 1.47,
    "is_question": -0.47,
    "prev_is_question": 0.13,
    "prev_coverage": -1.07,
    "prev_question_coverage": 1.99,
    "next_coverage": -0.72,
    "window_coverage": 3.40,
}

_WEIGHT_VECTOR = np.array([WEIGHTS[name] for name in FEATURES])


def linear(matrix: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The weighted sum per row (relevance.py reads it as one of its features)."""
    weighted: npt.NDArray[np.float64] = matrix @ _WEIGHT_VECTOR
    return weighted


def scores(matrix: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The order's score in 0..1 per row: the logistic of the weighted sum (the fitted intercept
    is left out: it cannot change an order, so this is no probability; relevance.py estimates
    that)."""
    return 1.0 / (1.0 + np.exp(-linear(matrix)))
