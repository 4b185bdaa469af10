"""Turning user text into safe FTS5 queries.

Nothing the user types reaches FTS5 syntax: words are pulled out with a Unicode-aware regex and
each is quoted, so ``AND``, ``NEAR``, ``*``, quotes, parentheses or emoji are just text (or
nothing).  The same normalisation computes the "fraction of query terms a memory contains" that
keyword-only hits report as their similarity.
"""

from __future__ import annotations

import re
import unicodedata

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


def quote(term: str) -> str:
    """An FTS5 string literal (the regex never yields quotes; doubling them is the safe habit)."""
    return '"' + term.replace('"', '""') + '"'


def any_of(terms: list[str]) -> str:
    return "(" + " OR ".join(quote(t) for t in terms) + ")"


def scope_filter(scope_tokens: list[str]) -> str:
    """Restrict a match to the caller's scopes via the one-token ``scope_token`` column."""
    return "scope_token : " + any_of(scope_tokens)


def terms_expression(terms: list[str]) -> str:
    """Documents of any scope containing any of ``terms`` in content or subjects."""
    return f"{{content subjects}} : {any_of(terms)}"


def match_expression(scope_tokens: list[str], terms: list[str]) -> str:
    """Documents of the given scopes containing any of ``terms`` in content or subjects."""
    return f"{scope_filter(scope_tokens)} AND {terms_expression(terms)}"


def scope_token(scope_key: str) -> str:
    """Mirror of the generated column ``hex(scope_key)``."""
    return scope_key.encode("utf-8").hex().upper()


def term_fraction(terms: list[str], *texts: str) -> float:
    """How many of the query ``terms`` occur as words in ``texts`` (0..1)."""
    if not terms:
        return 0.0
    words: set[str] = set()
    for text in texts:
        words.update(extract_all_words(text))
    return sum(1 for t in terms if t in words) / len(terms)
