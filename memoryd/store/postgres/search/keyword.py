"""The keyword retriever on PostgreSQL: BM25 over the stored term frequencies, per scope key.

Per visible scope key, the matches of any query term (the GIN index on ``terms``), BM25-scored
here with FTS5's formula (content weight 1, subjects 0.5).  A scope whose terms are all common
(COMMON_DOCS matches or more) ranks only its newest RECENT_WINDOW matches: the bound the SQLite
backend applies too, so a common word costs a bounded scan.  The statements are built here;
``measuring.py`` sends them with the counts they need.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from memoryd.store.postgres import tokens
from memoryd.store.postgres.visibility import predicate
from memoryd.store.visibility import Scope

#: A term matching at least this many of a scope's documents counts as common.
COMMON_DOCS = 1000
#: With only common terms, the newest this-many matches are ranked.
RECENT_WINDOW = 5000
K1, B = 1.2, 0.75

#: One SQL statement and its parameters.
Statement = tuple[str, tuple[object, ...]]


class KeyQuery(NamedTuple):
    """One scope key's keyword query: what each of its statements is built from."""

    scope: Scope
    key: str
    term_tokens: dict[str, list[str]]  # each query term's index tokens (``term_tokens``)
    depth: int  # the candidates wanted
    now_ms: int


def term_tokens(terms: list[str]) -> dict[str, list[str]]:
    """Each query term's index tokens (the terms with none left out)."""
    return {term: found for term in terms if (found := tokens.query_tokens(term))}


def bm25_statement(query: KeyQuery, counts: dict[str, int], size: int, present: list[str]) -> Statement:
    """The ``depth`` best visible matches of ``present`` in scope key ``key`` by FTS5's BM25
    formula, computed by the server from the stored term frequencies, over the scope's newest
    RECENT_WINDOW matches: (rowid, score), lower is better, as FTS5's."""
    scope, key, term_tokens, depth, now_ms = query
    where, params = predicate(scope, now_ms=now_ms, key=key)
    # IDF with the scope standing for the table (the counts are capped at COMMON_DOCS: a common
    # term's IDF is ~0 either way).
    docs = max(size, *(counts[t] for t in present))
    idfs = [max(1e-6, math.log((docs - counts[t] + 0.5) / (counts[t] + 0.5))) for t in present]
    # Each term's frequency is looked up once per row (f0, f1, ...), the score computed once.
    freqs = ", ".join(f"w.term_freqs[array_position(w.terms, %s)] AS f{i}" for i in range(len(present)))
    parts = " + ".join(
        f"coalesce(%s * f{i} * {K1 + 1} / (f{i} + {K1} * ({1 - B} + {B} * doc_len / a.avg_len)), 0)"
        for i in range(len(present))
    )
    alternatives = " OR ".join("m.terms @> %s" for _ in present)
    # Every row matches one of the terms with a positive IDF, so every score is below zero.
    sql = (
        "WITH w AS (SELECT m.rowid, m.terms, m.term_freqs, m.doc_len FROM memories AS m "
        f"WHERE {where} AND ({alternatives}) ORDER BY m.rowid DESC LIMIT %s), "
        "a AS (SELECT greatest(avg(doc_len), 1e-6) AS avg_len FROM w) "
        f"SELECT rowid, -({parts}) AS score FROM (SELECT w.rowid, w.doc_len, {freqs} FROM w OFFSET 0) AS f "
        "CROSS JOIN a ORDER BY score, rowid DESC LIMIT %s"
    )
    return sql, (
        *params,
        *[term_tokens[t] for t in present],
        RECENT_WINDOW,
        *idfs,
        *[term_tokens[t][0] for t in present],
        depth,
    )


def window_statement(query: KeyQuery, present: list[str], gate: str) -> Statement:
    """The SQLite backend's plan for common terms: the scope key's newest RECENT_WINDOW matches
    of any term, ranked by the summed IDF (FTS5's formula, the window standing for the table)
    of the terms each holds, newer first among equals; what the caller may see of them.  A
    one-term-frequency, average-length document scores that under BM25, so the scores merge
    with BM25's.  ``gate``: a condition that skips the scan when false (SQL, no parameters)."""
    scope, key, term_tokens, depth, now_ms = query
    shown, params = predicate(scope, now_ms=now_ms, key=key)
    wanted = [term_tokens[t] for t in present]
    holding: list[object]
    matching: list[object]
    if all(len(found) == 1 for found in wanted):
        # One token a term (nearly every query): the cheaper operators, one array test a row.
        holds = ", ".join(f"%s = ANY(m.terms) AS h{i}" for i in range(len(present)))
        holding, alternatives, matching = [found[0] for found in wanted], "m.terms && %s", [[f[0] for f in wanted]]
    else:
        holds = ", ".join(f"m.terms @> %s AS h{i}" for i in range(len(present)))
        holding, alternatives, matching = list(wanted), " OR ".join("m.terms @> %s" for _ in present), list(wanted)
    # Each term's IDF over the window, from the number of window rows holding it.
    idfs = ", ".join(
        f"greatest(1e-6, ln(({RECENT_WINDOW} - count(*) FILTER (WHERE h{i}) + 0.5)::float8 "
        f"/ (count(*) FILTER (WHERE h{i}) + 0.5)::float8)) AS i{i}"
        for i in range(len(present))
    )
    score = " + ".join(f"CASE WHEN h{i} THEN n.i{i} ELSE 0 END" for i in range(len(present)))
    sql = (
        f"(WITH w AS MATERIALIZED (SELECT m.rowid, ({shown}) AS shown, {holds} FROM memories AS m "
        f"WHERE {gate} AND m.scope_key = %s AND m.deleted_at_ms IS NULL AND ({alternatives}) "
        "ORDER BY m.rowid DESC LIMIT %s), "
        f"n AS (SELECT {idfs} FROM w) "
        f"SELECT w.rowid, -({score}) AS score FROM w CROSS JOIN n WHERE w.shown "
        "ORDER BY score, w.rowid DESC LIMIT %s)"
    )
    return sql, (*params, *holding, key, *matching, RECENT_WINDOW, depth)


def keyword_statement(query: KeyQuery, counts: dict[str, int], size: int) -> Statement | None:
    """The keyword candidates of one scope key as one statement, rows of (part, rowid, score):
    part 0 the BM25 hits, part 1 the recent window's.

    The SQLite backend's plan: with only rare terms (fewer than COMMON_DOCS matches each in the
    scope), every match is ranked; otherwise the rare terms rank alone (common terms have an IDF
    near zero, they barely move BM25), and only when they find fewer than ``depth`` is the
    recent window of every term ranked (the server skips it otherwise)."""
    term_tokens, depth = query.term_tokens, query.depth
    present = [t for t in term_tokens if counts.get(t, 0) > 0]
    if not present:
        return None
    rare = [t for t in present if counts[t] < COMMON_DOCS]
    if rare:
        bm25, bm25_params = bm25_statement(query, counts, size, rare)
    if len(rare) == len(present):
        return f"SELECT 0 AS part, rowid, score FROM ({bm25}) AS r", bm25_params
    if not rare:
        window, params = window_statement(query, present, "true")
        return f"SELECT 1 AS part, rowid, score FROM {window} AS c", params
    window, params = window_statement(query, present, f"(SELECT count(*) FROM r) < {int(depth)}")
    return (
        f"WITH r AS MATERIALIZED ({bm25}) SELECT 0 AS part, rowid, score FROM r "
        f"UNION ALL SELECT 1 AS part, rowid, score FROM {window} AS c ORDER BY part, score, rowid DESC",
        (*bm25_params, *params),
    )


def keyword_hits(rows: Sequence[Sequence[Any]], depth: int) -> list[tuple[int, float]]:
    """One scope key's candidates from ``keyword_statement``'s rows: the rare terms' hits, then
    the recent window's others, never ranked above the last of them."""
    hits = [(int(rowid), float(score)) for part, rowid, score in rows if part == 0]
    recent = [(int(rowid), float(score)) for part, rowid, score in rows if part == 1]
    if not recent:
        return hits[:depth]
    seen = {rowid for rowid, _ in hits}
    floor = hits[-1][1] if hits else float("-inf")
    extra = [(rowid, max(score, floor)) for rowid, score in recent if rowid not in seen]
    return hits + extra[: depth - len(hits)]


def merge_keys(per_key: list[list[tuple[int, float]]], depth: int) -> list[int]:
    """The scope keys' lists as one, best score first (BM25 is comparable across keys)."""
    return [rowid for rowid, _ in heapq.merge(*per_key, key=lambda hit: hit[1])][:depth]
