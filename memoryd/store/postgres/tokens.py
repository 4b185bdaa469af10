"""The keyword index's tokens: SQLite FTS5's own porter tokenizer, run in this process.

Words are stored and queried as the tokens ``porter unicode61 remove_diacritics 2`` makes of
them (``store/fts5_tokenizer.py``), exactly as the SQLite backend's FTS5 index and the term
matching (``store/term_match.py``) do, so the same query matches the same memories on both
backends and the ranking model sees the same coverage.  The tokenizer runs on an in-memory
SQLite connection (apsw is a dependency of memoryd anyway); each thread gets its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import apsw

from memoryd.store.fts5_tokenizer import tokenizer
from memoryd.store.term_match import Tokenize

_local = threading.local()


def connection() -> apsw.Connection:
    """This thread's in-memory SQLite connection (the tokenizer's host)."""
    db = getattr(_local, "db", None)
    if db is None:
        db = _local.db = apsw.Connection(":memory:")
        _local.tokenize = tokenizer(db)
    return db


def tokens(text: str) -> list[str]:
    """The index tokens of ``text``, in order, repeats kept."""
    if not text:
        return []
    connection()
    tokenize: Tokenize = _local.tokenize
    return tokenize(text)


#: BM25's weight of a subject's tokens next to the content's (FTS5's column weights 1.0, 0.5).
SUBJECT_WEIGHT = 0.5


def document_terms(content: str, subjects: Iterable[str]) -> tuple[list[str], list[float], float]:
    """A memory's keyword index entry: its distinct tokens (the ``terms`` column), each one's
    weighted frequency (``term_freqs``, subjects counting half), and the weighted length."""
    weights: dict[str, float] = {}
    length = 0.0
    for token in tokens(content):
        weights[token] = weights.get(token, 0.0) + 1.0
        length += 1.0
    for subject in subjects:
        for token in tokens(subject):
            weights[token] = weights.get(token, 0.0) + SUBJECT_WEIGHT
            length += SUBJECT_WEIGHT
    terms = sorted(weights)
    return terms, [weights[term] for term in terms], length


def query_tokens(term: str) -> list[str]:
    """The tokens one query term must all match (one for nearly every word)."""
    return list(dict.fromkeys(tokens(term)))
