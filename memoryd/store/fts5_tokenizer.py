"""The keyword index's tokenizer: SQLite FTS5's ``porter unicode61 remove_diacritics 2``.

Both engines index and weigh words as these tokens (SQLite in ``memories_fts``, PostgreSQL in
its ``terms`` column, both in the term weights of ``term_match.py``), so the same query matches
the same memories and the ranking model sees the same coverage.  PostgreSQL runs it on an
in-memory SQLite connection: this is the one module outside the SQLite engine that uses apsw.
"""

from __future__ import annotations

from typing import cast

import apsw

from memoryd.store.term_match import Tokenize

#: The tokenizer of ``memories_fts`` and of PostgreSQL's ``terms``.
TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])


def tokenizer(db: apsw.Connection) -> Tokenize:
    """The keyword index's tokenizer on ``db``: a text's index tokens, in order, repeats kept."""
    tokenize = db.fts5_tokenizer(*TOKENIZER)

    def tokens(text: str) -> list[str]:
        # Without offsets and colocated tokens, apsw returns the tokens alone.
        found = tokenize(
            text.encode("utf-8", "replace"),
            apsw.FTS5_TOKENIZE_DOCUMENT,
            None,
            include_offsets=False,
            include_colocated=False,
        )
        return cast(list[str], found)

    return tokens
