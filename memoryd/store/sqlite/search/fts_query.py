"""Turning query terms into safe FTS5 queries.

Nothing the user types reaches FTS5 syntax: the terms come from ``store/query_terms.py`` (words
pulled out with a Unicode-aware regex) and each is quoted here, so ``AND``, ``NEAR``, ``*``,
quotes, parentheses or emoji are just text (or nothing).
"""

from __future__ import annotations


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
