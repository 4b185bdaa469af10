"""Queries made only of symbols ("🎸", "€", "->"): found by their text, since they have no word.

The keyword index keeps letters and digits only (store/fts5_tokenizer.py), so such a query has
no keyword term and, without an embedder, no retriever at all.  Its candidates are then the
caller's memories whose content holds the query's text: each engine scans the newest SCAN_ROWS
memories of each scope key the caller sees, through the same visibility predicate as every other
retriever, so the scan costs the same whatever the store's size.  A query with a letter or a
digit is the keyword index's ("C#" is the term "c", "+1" the term "1").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: How many of a scope key's newest memories the scan reads at most (through the scope-and-time
#: index both engines have, newest first).  At 100k memories in one scope a symbol query took
#: 6.2 ms p50 in-process on SQLite, an FTS-only one 3.5 ms (bench/bench_store.py); 6.7 ms on
#: PostgreSQL, a two-word one 6.1 ms.  Older memories of a bigger scope are out of its reach.
SCAN_ROWS = 20_000

#: The relevance of a memory holding the whole text of a symbol-only query.  Relevance is the
#: chance a memory helps with the query; the fitted models (store/relevance.py) cannot say it,
#: as they read words and cosines and a symbol has no word.  The occurrence is what a search
#: for the symbol asks for, so it clears memory.search's gate by far; a chat message made only
#: of symbols is mostly a reaction ("👍"), which no memory answers, so it stays below
#: [context] min_relevance's default and is not pasted into a prompt unless a caller lowers it.
RELEVANCE = 0.2


def needle(text: str, terms: Sequence[str]) -> str | None:
    """The text a symbol-only query looks for (trimmed); None when the query has a word (its
    ``terms``, as query_terms.extract_terms gives them: the keyword index finds those) or
    nothing but spaces."""
    return None if terms else text.strip() or None


def first(
    ranked: Sequence[tuple[int, float]], holding: Sequence[int], relevant: Mapping[int, float]
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """``ranked`` with the candidates ``holding`` the query's text first (in ``holding``'s
    order), each given at least RELEVANCE; every place keeps its score, so scores still fall
    down the list."""
    relevances = dict(relevant)
    if not holding:
        return list(ranked), relevances
    listed = {rowid for rowid, _ in ranked}
    top = [rowid for rowid in dict.fromkeys(holding) if rowid in listed]
    for rowid in top:
        relevances[rowid] = max(relevances.get(rowid, 0.0), RELEVANCE)
    placed = set(top)
    order = top + [rowid for rowid, _ in ranked if rowid not in placed]
    return [(rowid, score) for rowid, (_, score) in zip(order, ranked, strict=True)], relevances
