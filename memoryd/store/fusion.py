"""Reciprocal rank fusion: how a ranked list joins another (the people retriever's list joins the
ranking model's order), the same for every backend."""

from __future__ import annotations

#: Reciprocal rank fusion constant (Cormack et al.), for the people retriever's list.
RRF_K = 60


def fuse(rankings: list[list[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal rank fusion: sum of 1/(k + rank) over the lists, best first (ties: first seen)."""
    scores: dict[int, float] = {}
    for ranked in rankings:
        for rank, rowid in enumerate(ranked, start=1):
            scores[rowid] = scores.get(rowid, 0.0) + 1.0 / (k + rank)
    return [rowid for rowid, _ in sorted(scores.items(), key=lambda item: -item[1])]
