"""The keyword index's tokenizer for the shared term weights (``store/term_match.py``).

``memories_fts`` (schema.py) tokenizes with ``porter unicode61 remove_diacritics 2``; the term
weights compare a memory's words with the query's through that same tokenizer, taken from the
search's own connection.
"""

from __future__ import annotations

from collections.abc import Mapping

import apsw

from memoryd.store.term_match import TermWeights, Tokenize

#: The tokenizer of ``memories_fts`` (schema.py).
_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])


def tokenizer(db: apsw.Connection) -> Tokenize:
    """``memories_fts``'s tokenizer on ``db``: a text's index tokens, in order."""
    tokenize = db.fts5_tokenizer(*_TOKENIZER)

    def tokens(text: str) -> list[str]:
        found: list[str] = tokenize(
            text.encode("utf-8", "replace"),
            apsw.FTS5_TOKENIZE_DOCUMENT,
            None,
            include_offsets=False,
            include_colocated=False,
        )
        return found

    return tokens


def term_weights(db: apsw.Connection, terms: list[str], doc_counts: Mapping[str, int], scope_docs: int) -> TermWeights:
    """The query's term weights in the caller's scope, tokenized as ``memories_fts`` does."""
    return TermWeights(tokenizer(db), terms, doc_counts, scope_docs)
