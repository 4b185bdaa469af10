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

What grows with the scope, and how it is kept from growing (stores of a million memories):
``bm25()`` learns each phrase's IDF by walking the phrase's whole doclist, once per statement.
The scope token's doclist is the scope (see ``bm25_ranked`` for the wide scopes that leave it
out), and a common term's is most of it (a word in 90 % of a million memories).  So the window
is not ranked by ``bm25()``: each term's doclist is walked over the window's rowid range only,
and FTS5's IDF formula is applied over the window, which costs the window, not the scope.

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
import numpy.typing as npt

from memoryd.store.sqlite.search import fts_query, scope_stats
from memoryd.store.sqlite.visibility_sql import predicate
from memoryd.store.visibility import Scope

#: A term matching at least this many of the scope's documents counts as common.
COMMON_DOCS = scope_stats.COMMON_DOCS
#: With only common terms, the newest this-many matches are ranked.
RECENT_WINDOW = 5000
#: A scope key holding at least this share of the table ranks without its scope token.
WIDE_SHARE = 0.5
#: Weights of the FTS columns (content, subjects, scope_token) in BM25.
_BM25 = "bm25(memories_fts, 1.0, 0.5, 0.0)"

Ranked = list[tuple[int, float]]  # (rowid, bm25: lower is better)


def bm25_ranked(
    db: apsw.Connection,
    scope: Scope,
    key: str,
    terms: list[str],
    depth: int,
    now_ms: int,
    *,
    probe_first: bool = True,
) -> Ranked:
    """The ``depth`` best visible matches of any of ``terms`` in scope key ``key``, best first
    (score, then the newer rowid).  ``probe_first=False`` skips the shortcut below (tests
    compare the two)."""
    scoped = fts_query.match_expression([fts_query.scope_token(key)], terms)
    if not probe_first:
        return _bm25_ranked_joined(db, scope, key, scoped, depth, now_ms)
    # FTS5 scores every match either way; joining each match to its memories row for the
    # visibility check costs a b-tree seek per match (~25% of the statement in a 10k scope).
    # Nearly every match of the scope token is visible, so first rank the matches alone and
    # check the best few: when enough of them are visible, they are exactly the top of the
    # joined query (same order, every row before them checked).
    probe, expression = 2 * depth, scoped
    share = scope_stats.share(db, key)
    if share >= WIDE_SHARE:
        # bm25() counts each phrase's documents in the whole table before it scores a row: for
        # the scope token of a scope holding most of the table that walk alone costs more than
        # the query (2.5 vs 0.25 ms at 100k memories).  The token's column weighs 0, so a row's
        # score is the same without it: rank the terms' matches in every scope, keep this
        # key's.
        probe, expression = math.ceil(probe / share), fts_query.terms_expression(terms)
    best = [
        (int(rowid), float(score))
        for rowid, score in db.execute(
            f"SELECT rowid, {_BM25} AS score FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY score, rowid DESC LIMIT ?",
            (expression, probe),
        )
    ]
    visible = _visible(db, scope, key, [rowid for rowid, _ in best], now_ms)
    shown = [hit for hit in best if hit[0] in visible]
    if len(shown) >= depth or len(best) < probe:
        return shown[:depth]
    return _bm25_ranked_joined(db, scope, key, scoped, depth, now_ms)


def _visible(db: apsw.Connection, scope: Scope, key: str, rowids: list[int], now_ms: int) -> set[int]:
    if not rowids:
        return set()
    visible, params = predicate(scope, "m", now_ms=now_ms, key=key)
    # CROSS JOIN: look up each rowid, never walk the scope.
    return {
        int(rowid)
        for (rowid,) in db.execute(
            f"SELECT m.rowid FROM json_each(?) AS w CROSS JOIN memories AS m ON m.rowid = w.value WHERE {visible}",
            (json.dumps(rowids), *params),
        )
    }


def _bm25_ranked_joined(
    db: apsw.Connection, scope: Scope, key: str, expression: str, depth: int, now_ms: int
) -> Ranked:
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


def term_counts(db: apsw.Connection, key: str, terms: list[str]) -> dict[str, int]:
    """How many of the scope key's documents hold each term, capped at COMMON_DOCS."""
    return scope_stats.measure(db, key, terms)[0]


def _recent_matches(db: apsw.Connection, scope: Scope, key: str, terms: list[str], depth: int, now_ms: int) -> Ranked:
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
    per_term = [_matches_from(db, fts_query.match_expression([token], [term]), low) for term in terms]
    if not any(len(rowids) for rowids in per_term):
        return []
    # Summed in numpy: up to RECENT_WINDOW rowids per term, a dict per rowid cost ~10 ms.
    rowids, slots = np.unique(np.concatenate(per_term), return_inverse=True)
    weights = np.concatenate([np.full(len(r), -bm25_idf(RECENT_WINDOW, len(r))) for r in per_term])
    scores = np.bincount(slots, weights=weights, minlength=len(rowids))
    order = np.lexsort((-rowids, scores))  # best score first, newer first among equals
    ranked: Ranked = []
    for start in range(0, len(order), 4 * depth):
        batch = [(int(rowids[i]), float(scores[i])) for i in order[start : start + 4 * depth]]
        shown = _visible(db, scope, key, [rowid for rowid, _ in batch], now_ms)
        ranked.extend(hit for hit in batch if hit[0] in shown)
        if len(ranked) >= depth:
            break
    return ranked[:depth]


def _matches_from(db: apsw.Connection, expression: str, low: int) -> npt.NDArray[np.int64]:
    """The rowids matching ``expression`` from ``low`` on.  SQLite joins them into one string
    and numpy parses it: a Python loop over up to RECENT_WINDOW rows took three times longer."""
    (joined,) = db.execute(
        "SELECT group_concat(rowid) FROM memories_fts WHERE memories_fts MATCH ? AND rowid >= ?", (expression, low)
    ).fetchone()
    if not joined:
        return np.zeros(0, np.int64)
    return np.fromstring(joined, dtype=np.int64, sep=",")


def bm25_idf(documents: int, holding: int) -> float:
    """FTS5's bm25() IDF, with its floor: common terms weigh almost nothing, never less than 0."""
    return max(1e-6, math.log((documents - holding + 0.5) / (holding + 0.5)))


def _scope_candidates(
    db: apsw.Connection, scope: Scope, key: str, terms: list[str], depth: int, now_ms: int, counts: Mapping[str, int]
) -> Ranked:
    present = [t for t in terms if counts[t] > 0]
    if not present:
        return []
    rare = [t for t in present if counts[t] < COMMON_DOCS]
    if len(rare) == len(present):
        return bm25_ranked(db, scope, key, present, depth, now_ms)
    hits = bm25_ranked(db, scope, key, rare, depth, now_ms) if rare else []
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
    per_key = [_scope_candidates(db, scope, key, terms, depth, now_ms, n) for key, n in zip(keys, counts, strict=True)]
    merged = heapq.merge(*per_key, key=lambda hit: hit[1])
    return [rowid for rowid, _ in merged][:depth]
