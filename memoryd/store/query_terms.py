"""Turning user text into query terms, and the word-matching rules both engines share.

Words are pulled out with a Unicode-aware regex, folded the way the keyword index folds them
(lower case, diacritics removed) and deduplicated; question words are dropped when the query has
other words.  The same normalisation computes the "fraction of query terms a memory contains"
that keyword-only hits report as their similarity, and the people retriever's order (the
memories sharing most of the question's other words first).  How the terms become an index query
is each engine's own business (FTS5 syntax in the SQLite engine, token arrays in PostgreSQL).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

#: Letters and digits in any script (``\\w`` minus the underscore, which unicode61 splits on).
_WORD = re.compile(r"[^\W_]+")
#: A query longer than this many distinct terms keeps its first ones; the rest add little.
MAX_TERMS = 32


def _fold(text: str) -> str:
    """Lower-case and strip diacritics, like ``unicode61 remove_diacritics 2``."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


#: English function words.  A question ("what does my wife like to eat?") would otherwise match
#: every memory holding "to" or "my", and in rank fusion such a hit weighs as much as the best
#: vector match.  Dropped only when the query has other words.
STOPWORDS = frozenset(
    """a about am an and any are as at be been being but by can could did do does doing for from
    had has have having he her hers him his how i if in into is it its me my myself no nor not
    of on or our ours she should so some such than that the their theirs them then there these
    they this those to too us was we were what when where which while who whom why will with
    would you your yours""".split()
)


def extract_terms(text: str) -> list[str]:
    """The distinct words of ``text``, folded, in first-seen order (at most MAX_TERMS), without
    stopwords unless the query has nothing else."""
    terms = list(dict.fromkeys(extract_all_words(text)))
    content = [term for term in terms if term not in STOPWORDS]
    return (content or terms)[:MAX_TERMS]


def extract_all_words(text: str) -> list[str]:
    """Every word of ``text``, folded (NUL and lone surrogates are simply not words)."""
    return _WORD.findall(_fold(unicodedata.normalize("NFKC", text)))


def term_fraction(terms: list[str], *texts: str) -> float:
    """How many of the query ``terms`` occur as words in ``texts`` (0..1)."""
    if not terms:
        return 0.0
    words: set[str] = set()
    for text in texts:
        words.update(extract_all_words(text))
    return sum(1 for t in terms if t in words) / len(terms)


def by_shared_words(pool: Sequence[tuple[int, str]], rest: str) -> list[tuple[int, str]]:
    """``pool`` (rowid, text) with the texts sharing the most of ``rest``'s words first ("like"
    finds "Sarah likes Italian food" before "Sarah's birthday is in May"); the order is stable,
    so the pool's own order (newest first) holds among equals."""
    stems = sorted({_stem(term) for term in extract_terms(rest)}, key=len, reverse=True)
    if not stems:
        return list(pool)
    # One regex per query ("like" matches "likes", "liked"): C speed over the pool.
    words = re.compile(r"\b(" + "|".join(map(re.escape, stems)) + r")[a-z]{0,4}\b")

    def shared(text: str) -> int:
        plain = text.lower() if text.isascii() else " ".join(extract_all_words(text))
        return len(set(words.findall(plain)))

    return sorted(pool, key=lambda row: -shared(row[1]))


def _stem(word: str) -> str:
    """A crude English stem ("likes", "liked" -> "like"), cheap enough for a whole pool."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word
