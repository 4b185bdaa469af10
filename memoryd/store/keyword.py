"""The keyword retriever: FTS5 BM25 confined to the caller's scopes, fast in huge scopes.

The MATCH expression ANDs the scope's one-token ``scope_token`` with the query terms, so FTS5
itself only walks the scope's documents; the join re-checks scope, deletion and expiry.

FTS5 scores every document a query matches (no WAND-style skipping), and in a scope of ~100k
memories a word such as "the" matches nearly all of them.  So, per scope key:

1. each term's document count *within the scope* is measured, capped at COMMON_DOCS;
2. if no term reaches the cap (every small scope), the full OR query runs: exact BM25;
3. otherwise the rare terms run alone (common terms have near-zero IDF, so they barely move
   BM25 anyway), and if that yields fewer than ``depth`` hits, the newest RECENT_WINDOW matches
   of the full query are ranked by the IDF-weighted share of the query terms they hold
   (``_recent_matches``), after the rare-term hits.

What grows with the scope, and how it is kept from growing (issue 13, a million memories):

* ``bm25()`` learns each phrase's IDF by walking the phrase's whole doclist, once per statement.
  The scope token is a phrase of the MATCH, and its doclist is the scope: 2.9 ms at 100k
  memories, ~30 ms at a million, for every BM25 statement, even one whose terms match ten
  documents.  In a big scope the rare-term statement therefore leaves the token out when the
  terms' documents in the whole table are few (``TABLE_WALK``): FTS5 walks those, and the join
  keeps the scope's.  The scores are the same (the token's column weighs 0 in ``_BM25``).
* For common terms even their own doclists are big (a word in 90 % of a million memories), so
  the window is not ranked by ``bm25()`` but by one doclist walk per term over the window's
  rowid range, which costs the window, not the scope.

Scope keys are planned separately, so a user's few personal memories get the exact plan even
inside a huge group chat.  BM25 uses table-wide statistics, so scores of different scopes are
comparable and the per-key lists merge by score.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Mapping, Sequence

import apsw
import numpy as np

from memoryd.store import fts_query
from memoryd.store.db import one
from memoryd.store.visibility import Scope, predicate

#: A term matching at least this many of the scope's documents counts as common.
COMMON_DOCS = 1000
#: With only common terms, the newest this-many matches are ranked.
RECENT_WINDOW = 5000
#: A big scope's rare-term statement walks the whole table's matches (not the scope token's
#: doclist) when they are fewer than this.
TABLE_WALK = 5000
#: Weights of the FTS columns (content, subjects, scope_token) in BM25.
_BM25 = "bm25(memories_fts, 1.0, 0.5, 0.0)"

Ranked = list[tuple[int, float]]  # (rowid, bm25: lower is better)


def _bm25_ranked(db: apsw.Connection, scope: Scope, key: str, expression: str, depth: int, now_ms: int) -> Ranked:
    visible, params = predicate(scope, "m", now_ms=now_ms, key=key)
    rows = db.execute(
        f"""
        SELECT f.rowid, {_BM25} AS score
        FROM memories_fts AS f JOIN memories AS m ON m.rowid = f.rowid
        WHERE memories_fts MATCH ? AND {visible}
        ORDER BY score, f.rowid DESC
        LIMIT ?
        """,
        (expression, *params, depth),
    )
    return [(int(rowid), float(score)) for rowid, score in rows]


def _capped_doc_count(db: apsw.Connection, expression: str, cap: int) -> int:
    (count,) = one(
        db,
        "SELECT count(*) FROM (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)",
        (expression, cap),
    )
    return int(count)


def term_counts(db: apsw.Connection, key: str, terms: list[str]) -> dict[str, int]:
    """How many of the scope key's documents hold each term, capped at COMMON_DOCS."""
    tokens = [fts_query.scope_token(key)]
    return {t: _capped_doc_count(db, fts_query.match_expression(tokens, [t]), COMMON_DOCS) for t in terms}


def scope_size(db: apsw.Connection, key: str) -> int:
    """How many documents the scope key holds, capped at COMMON_DOCS (the term counts' cap)."""
    return _capped_doc_count(db, fts_query.scope_filter([fts_query.scope_token(key)]), COMMON_DOCS)


def _rare_expression(db: apsw.Connection, key: str, terms: list[str], big: bool) -> str:
    """The MATCH for ``terms`` in the scope ``key``: with its scope token, unless the scope is
    ``big`` and the terms' documents in the whole table are fewer than TABLE_WALK."""
    scoped = fts_query.match_expression([fts_query.scope_token(key)], terms)
    if not big:
        return scoped
    anywhere = fts_query.terms_anywhere(terms)
    return anywhere if _capped_doc_count(db, anywhere, TABLE_WALK) < TABLE_WALK else scoped


def _recent_matches(
    db: apsw.Connection, scope: Scope, key: str, terms: list[str], depth: int, now_ms: int
) -> Ranked:
    """The newest RECENT_WINDOW matches of ``terms`` in the scope, best first by the summed IDF
    (FTS5's formula, the window standing for the table) of the terms each holds, newer first
    among equals.  A one-term-frequency, average-length document scores that under BM25, so the
    scores merge with BM25's.  Each term costs one walk of its doclist over the window."""
    token = fts_query.scope_token(key)
    # rowids grow with time: the RECENT_WINDOW-th newest match bounds the window.
    bound = db.execute(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
        (fts_query.match_expression([token], terms), RECENT_WINDOW - 1),
    ).fetchone()
    low = bound[0] if bound else 0
    per_term = [
        np.fromiter(
            (rowid for (rowid,) in db.execute(
                "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? AND rowid >= ?",
                (fts_query.match_expression([token], [term]), low),
            )),
            dtype=np.int64,
        )
        for term in terms
    ]  # fmt: skip
    if not any(len(rowids) for rowids in per_term):
        return []
    # Summed in numpy: up to RECENT_WINDOW rowids per term, a dict per rowid cost ~10 ms.
    rowids, slots = np.unique(np.concatenate(per_term), return_inverse=True)
    weights = np.concatenate([np.full(len(r), -_bm25_idf(RECENT_WINDOW, len(r))) for r in per_term])
    scores = np.bincount(slots, weights=weights, minlength=len(rowids))
    order = np.lexsort((-rowids, scores))  # best score first, newer first among equals
    visible_sql, params = predicate(scope, "m", now_ms=now_ms, key=key)
    ranked: Ranked = []
    for start in range(0, len(order), 4 * depth):
        batch = [(int(rowids[i]), float(scores[i])) for i in order[start : start + 4 * depth]]
        shown = {
            rowid
            for (rowid,) in db.execute(
                # CROSS JOIN: the ids drive; left to choose, SQLite walks the scope (400 ms at 100k).
                f"SELECT m.rowid FROM json_each(?) AS w CROSS JOIN memories AS m ON m.rowid = w.value "
                f"WHERE {visible_sql}",
                (json.dumps([rowid for rowid, _ in batch]), *params),
            )
        }
        ranked.extend(hit for hit in batch if hit[0] in shown)
        if len(ranked) >= depth:
            break
    return ranked[:depth]


def _bm25_idf(documents: int, holding: int) -> float:
    """FTS5's bm25() IDF, with its floor: common terms weigh almost nothing, never less than 0."""
    return max(1e-6, math.log((documents - holding + 0.5) / (holding + 0.5)))


def _scope_candidates(
    db: apsw.Connection, scope: Scope, key: str, terms: list[str], depth: int, now_ms: int, counts: Mapping[str, int]
) -> Ranked:
    tokens = [fts_query.scope_token(key)]
    present = [t for t in terms if counts[t] > 0]
    if not present:
        return []
    rare = [t for t in present if counts[t] < COMMON_DOCS]
    if len(rare) == len(present):
        return _bm25_ranked(db, scope, key, fts_query.match_expression(tokens, present), depth, now_ms)
    # A term reached COMMON_DOCS: the scope is at least that big.
    hits = _bm25_ranked(db, scope, key, _rare_expression(db, key, rare, True), depth, now_ms) if rare else []
    if len(hits) >= depth:
        return hits
    recent = _recent_matches(db, scope, key, present, depth, now_ms)
    seen = {rowid for rowid, _ in hits}
    # Ranked after the rare-term hits: never better than the last of them.
    floor = hits[-1][1] if hits else float("-inf")
    extra = [(rowid, max(score, floor)) for rowid, score in recent if rowid not in seen]
    return hits + extra[: depth - len(hits)]


def candidates(
    db: apsw.Connection,
    scope: Scope,
    terms: list[str],
    depth: int,
    now_ms: int,
    counts: Sequence[Mapping[str, int]] | None = None,
) -> list[int]:
    """Rowids of the caller's memories matching any term, best BM25 first (at most ``depth``).

    ``counts``: each visible key's :func:`term_counts`, when the caller measured them already."""
    if not terms:
        return []
    keys = scope.visible_keys()
    if counts is None:
        counts = [term_counts(db, key, terms) for key in keys]
    per_key = [
        _scope_candidates(db, scope, key, terms, depth, now_ms, n) for key, n in zip(keys, counts, strict=True)
    ]
    merged = heapq.merge(*per_key, key=lambda hit: hit[1])
    return [rowid for rowid, _ in merged][:depth]
