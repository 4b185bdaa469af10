"""The shared term weights (``store/term_match.py``) on the SQLite engine.

``memories_fts`` (schema.py) tokenizes with ``porter unicode61 remove_diacritics 2``; the term
weights compare a memory's words with the query's through that same tokenizer
(``store/fts5_tokenizer.py``), taken from the search's own connection.
"""

from __future__ import annotations

from collections.abc import Mapping

import apsw

from memoryd.store.fts5_tokenizer import tokenizer
from memoryd.store.term_match import TermWeights


def term_weights(db: apsw.Connection, terms: list[str], doc_counts: Mapping[str, int], scope_docs: int) -> TermWeights:
    """The query's term weights in the caller's scope, tokenized as ``memories_fts`` does."""
    return TermWeights(tokenizer(db), terms, doc_counts, scope_docs)
