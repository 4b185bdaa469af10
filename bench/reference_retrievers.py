"""Reference rows for bench/retrieval.py, computed in-process over the daemon's database file.

- BM25: memoryd's keyword retriever alone (FTS5, porter, stopwords dropped);
- dense: exact cosine of the local model's query vector with every stored vector of the user;
- RRF: reciprocal rank fusion (k=60) of the top 50 of each, memoryd's ranking before its ranking model (store/ranking.py);
- memoryd (in-process): ``memoryd.store.sqlite.search.search.search`` on the same file with the same query
  vectors, which should match the socket row (it is what lets ranking work iterate in seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw
import locomo
import numpy as np

from memoryd.embed.local import BUNDLED_SHA256, bundled_model_path
from memoryd.embed.sentence_model import SentenceModel
from memoryd.ids import now_ms
from memoryd.store import query_terms
from memoryd.store.sqlite.db.database import open_connection
from memoryd.store.sqlite.search import keyword, search, search_parts
from memoryd.store.sqlite.vectors import vector_codec, vectors
from memoryd.store.visibility import Scope, personal_key

#: The old fusion's depth per retriever (its constant is search.RRF_K, Cormack et al.).
RRF_DEPTH = 50


def embed_questions(conversations: list[locomo.Conversation], form: Callable[[str], str] = str) -> list[np.ndarray]:
    """Each conversation's questions' unit vectors, of ``form(question)`` (the daemon embeds
    query_form.embedded_form of a query; the reference retrievers read the question as it is)."""
    model = SentenceModel(bundled_model_path(), expected_sha256=BUNDLED_SHA256)
    try:
        out = []
        for c in conversations:
            matrix = model.embed([form(q.text) for q in c.questions])
            out.append(matrix / np.linalg.norm(matrix, axis=1, keepdims=True))
        return out
    finally:
        model.close()


def _dense(db: apsw.Connection, space: vectors.VectorSpace, key: str, unit: np.ndarray) -> list[int]:
    rows = db.execute(f"SELECT memory_rowid, embedding FROM {space.table} WHERE scope_key = ?", (key,)).fetchall()
    # The table holds the 6-bit rescoring copy (schema m012); its cosine is within 0.01 of float32's.
    cosines = vector_codec.cosines([blob for _, blob in rows], unit, space.dim)
    return [rows[i][0] for i in np.argsort(-cosines, kind="stable")]


def rankings(
    db: apsw.Connection, conversation: locomo.Conversation, question: locomo.Question, unit: np.ndarray
) -> dict[str, list[int]]:
    """Rowids, best first, per reference retriever."""
    space = vectors.read_space(db)
    assert space is not None, "the database has no vectors"
    key = personal_key(conversation.user_id)
    now = now_ms()
    words = keyword.candidates(
        db, Scope(conversation.user_id), query_terms.extract_terms(question.text), RRF_DEPTH, now
    )
    dense = _dense(db, space, key, unit)
    fused = search.fuse([words, dense[:RRF_DEPTH]])
    query = search_parts.SearchQuery(question.text, locomo.LIMIT, unit, space, now)
    hits = search.search(db, Scope(conversation.user_id), query)
    rowid_of = dict(db.execute("SELECT id, rowid FROM memories"))
    return {
        "BM25 (memoryd keyword retriever)": words,
        "dense (MiniLM cosine)": dense,
        "RRF k=60 of top 50 each (memoryd before)": fused,
        "memoryd (in-process)": [rowid_of[hit.id] for hit in hits],
    }


def score_all(
    path: Path, conversations: list[locomo.Conversation], labels: dict[str, list[str]]
) -> dict[str, locomo.Scores]:
    db = open_connection(path, busy_timeout_ms=5000, readonly=True)
    try:
        ids = dict(db.execute("SELECT rowid, id FROM memories"))
        results: dict[str, locomo.Scores] = {}
        for conversation, units in zip(conversations, embed_questions(conversations), strict=True):
            for question, unit in zip(conversation.questions, units, strict=True):
                for name, ranked in rankings(db, conversation, question, unit).items():
                    hits = [labels.get(ids[rowid], []) for rowid in ranked[: locomo.LIMIT]]
                    results.setdefault(name, locomo.Scores()).add(question, hits)
        return results
    finally:
        db.close()
