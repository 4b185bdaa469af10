"""Reciprocal rank fusion (``store/fusion.py``): how the people retriever's list joins the ranking."""

from __future__ import annotations

from memoryd.store.fusion import RRF_K, fuse


def test_a_rowid_in_both_lists_rises_above_the_tops_of_either() -> None:
    # 2 (second in the first list) and 4 (second in the second) tie: first seen goes first.
    assert fuse([[1, 2, 3], [3, 4]]) == [3, 1, 2, 4]


def test_ties_keep_the_order_first_seen() -> None:
    # Equal sums (each rowid first in one list and second in the other; each alone at rank 1):
    # the first list's order decides, then the second's, every time.
    assert fuse([[1, 2], [2, 1]]) == [1, 2]
    assert fuse([[2, 1], [1, 2]]) == [2, 1]
    assert fuse([[7], [5], [6]]) == [7, 5, 6]


def test_k_decides_whether_agreement_beats_one_first_place() -> None:
    # 3 is third in both lists; 1 and 4 are each first in one.  With k = 0 a first place (1/1)
    # outweighs two third places (2/3); with the default k, agreement wins (2/63 > 1/61).
    assert fuse([[1, 2, 3], [4, 5, 3]], k=0) == [1, 4, 3, 2, 5]
    assert fuse([[1, 2, 3], [4, 5, 3]], k=RRF_K) == [3, 1, 4, 2, 5]
