"""Which of the query's terms a memory holds, weighted by how rare each is in the caller's scope.

A table-wide BM25 uses table-wide statistics, so a word that is rare among all users but sits in
half of one user's memories (their own name, their town) weighs like a rare word, and a memory
that repeats it outranks one holding the question's real subject.  The ranker reads the scope's
own document frequencies instead (each engine measures them anyway to plan its keyword query)
and computes a memory's *coverage*: the IDF-weighted share of the query's terms it contains,
each term counted once however often it occurs.

Words are compared as the keyword index's tokens (porter over unicode61, diacritics removed),
so "played" in a memory matches "play" in a question exactly as the index does.  The engine
hands in its tokenizer: both run SQLite FTS5's own, so both rank with the same words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

#: A text's index tokens, in order (the engine's tokenizer; never called with an empty text).
Tokenize = Callable[[str], list[str]]


class TermWeights:
    """The query's terms (as index tokens) with their IDF in the caller's scope."""

    def __init__(self, tokenize: Tokenize, terms: list[str], doc_counts: Mapping[str, int], scope_docs: int) -> None:
        self._tokenize = tokenize
        self.weights: dict[str, float] = {}
        for term in terms:
            for token in self.tokens(term)[:1]:
                self.weights[token] = self.weights.get(token, 0.0) + idf(doc_counts.get(term, 0), scope_docs)
        self.total = sum(self.weights.values())
        self._weighed = tuple(self.weights.items())
        # Porter only rewrites the end of a word, and every rewrite keeps the stem's last-but-one
        # letter in place ("happi" <- happy, "relat" <- relational), so an ASCII text can hold a
        # token only if it holds the token minus its last letter: a substring test (C speed)
        # spares tokenizing the many candidates that share no word with the query.
        hints = "|".join(map(re.escape, sorted({token[:-1] or token for token in self.weights})))
        # One alternation scans a text once, where a test per hint scans it once per term.  (Stemming
        # only the words that hold a hint was measured slower on conversations: the speakers' names
        # put a hint in nearly every text, and one tokenizer call per text is cheap.)
        self._hinted = re.compile(hints).search
        # A text's coverage is asked again when the search measured it ahead (the keyword part).
        self._known: dict[str, float] = {}

    def tokens(self, text: str) -> list[str]:
        if not text:
            return []
        return self._tokenize(text)

    def coverage(self, text: str) -> float:
        """The IDF-weighted share (0..1) of the query's terms found in ``text``."""
        known = self._known.get(text)
        if known is None:
            known = self._known[text] = self._measure(text)
        return known

    def _measure(self, text: str) -> float:
        if self.total <= 0.0:
            return 0.0
        if text.isascii() and self._hinted(text.lower()) is None:
            return 0.0
        found = set(self._tokenize(text))  # not empty: an empty text holds no hint
        # A list, not a generator: the same sum in the same order, without a frame per term.
        return sum([weight for token, weight in self._weighed if token in found]) / self.total


def idf(doc_count: int, scope_docs: int) -> float:
    """BM25's inverse document frequency, never negative (a term in every document weighs ~0)."""
    docs = max(scope_docs, doc_count)
    return math.log(1.0 + (docs - doc_count + 0.5) / (doc_count + 0.5))
