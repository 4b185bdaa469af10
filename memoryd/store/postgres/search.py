"""Hybrid search on PostgreSQL: keyword and vector candidates, ranked by the shared model.

The candidate rules, features and model are the SQLite backend's (``store/ranking.py``,
``store/fusion.py``, the same tokens and term weights):

- keyword candidates: per visible scope key, the matches of any query term (the GIN index on
  ``terms``), BM25-scored here with FTS5's formula (content weight 1, subjects 0.5).  A scope
  whose terms are all common (COMMON_DOCS matches or more) ranks only its newest RECENT_WINDOW
  matches: the bound the SQLite backend applies too, so a common word costs a bounded scan;
- vector candidates: exact cosine search, one ``UNION ALL`` branch per visible scope key, each
  with its own ORDER BY ... LIMIT (a global ANN index with a scope filter lost small scopes'
  results; an exact scan through the scope's primary key range loses nothing);
- the neighbours of each candidate (previous and next memories of its scope), the ranking
  model's features, the semantic guard, the people retriever's list fused in, diversification.

A search is one transaction on one connection in pipeline mode: statements that do not need
each other's results are sent together and cost one round trip.  It takes three: (1) BEGIN, the
vector space's generation, the KNN and, per scope key, one statement that counts the terms not
known to be common (``ScopeStats``), ranks the rare ones and, only when they find too few, the
recent window; (2) the candidates' neighbourhood with the cosines the ranking reads; (3) the
records of the hits with the people they are about, and COMMIT.  A term first found common
costs one more (its key's statement is sent again, as a common term's).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import psycopg

from memoryd.store import query_terms, ranking, relevance
from memoryd.store.fusion import fuse
from memoryd.store.neighbourhood import Neighbourhood, Row
from memoryd.store.people_records import PeopleFocus
from memoryd.store.postgres import tokens
from memoryd.store.postgres.memories import RECORD_COLUMNS, hide_unseen_successors, record
from memoryd.store.postgres.visibility import predicate
from memoryd.store.records import MemoryRecord, SearchHit, hit_from_record
from memoryd.store.term_match import TermWeights
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]
log = logging.getLogger("memoryd.store")
_decode = msgspec.json.decode

#: A term matching at least this many of a scope's documents counts as common.
COMMON_DOCS = 1000
#: With only common terms, the newest this-many matches are ranked.
RECENT_WINDOW = 5000
REACH = ranking.WINDOW + 1
K1, B = 1.2, 0.75
#: The newest memories of the mentioned people that the people retriever ranks.
RANK_POOL = 200


def candidate_depth(limit: int) -> int:
    return max(limit, 20)


def coarse_k(depth: int) -> int:
    return max(3 * depth, 64)


def _text(content: str, subjects: str) -> str:
    if not subjects or subjects == "[]":
        return content
    return " ".join([content, *_decode(subjects)])


# -- keyword retriever -----------------------------------------------------------------------

#: One SQL statement and its parameters.
Statement = tuple[str, tuple[object, ...]]


def _term_tokens(terms: list[str]) -> dict[str, list[str]]:
    return {term: found for term in terms if (found := tokens.query_tokens(term))}


class ScopeStats:
    """What searches learn of each scope key and keep for a minute, so that a search of a known
    key sends fewer statements: which keys hold HNSW_FROM vectors or more (the plan of their
    KNN), which terms are common in a key and which keys hold COMMON_DOCS memories or more.

    Only facts that writes can hardly make wrong are kept, and a wrong one changes a plan, never
    what a search may find: a term's and a key's counts are capped at COMMON_DOCS, so "at the
    cap" is what measuring returns again until deletions bring it below (the term then ranks
    through the recent window instead of exactly); and a key near HNSW_FROM is searched well
    either way.  A new memory is found at once whatever is kept here (the candidates are read
    from the rows themselves)."""

    TTL_S = 60.0
    #: Past this many entries the memory starts again (a daemon serving very many users).
    MAX_ENTRIES = 100_000

    def __init__(self) -> None:
        self._known: dict[tuple[object, ...], tuple[bool, float]] = {}

    def get(self, *fact: object) -> bool | None:
        entry = self._known.get(fact)
        if entry is None or time.monotonic() - entry[1] > self.TTL_S:
            return None
        return entry[0]

    def put(self, value: bool, *fact: object) -> None:
        if len(self._known) >= self.MAX_ENTRIES:
            self._known.clear()
        self._known[fact] = (value, time.monotonic())

    # The facts kept:

    def big(self, key: str, generation: int) -> bool | None:
        return self.get("vectors", key, generation, HNSW_FROM)

    def common(self, key: str, found: list[str]) -> bool:
        return bool(self.get("term", key, tuple(found), COMMON_DOCS))

    def full(self, key: str) -> bool:
        return bool(self.get("size", key, COMMON_DOCS))


class Measuring:
    """Each query term's document count in one scope key and the key's size, capped at
    COMMON_DOCS: what ``stats`` knows, and one statement for the rest."""

    def __init__(self, key: str, term_tokens: dict[str, list[str]], stats: ScopeStats | None) -> None:
        self.key = key
        self.term_tokens = term_tokens
        self.stats = stats
        self.counts = {t: COMMON_DOCS for t, found in term_tokens.items() if stats and stats.common(key, found)}
        self.size = COMMON_DOCS if stats and stats.full(key) else None
        self.unknown = [t for t in term_tokens if t not in self.counts]
        self._cursor: psycopg.Cursor[Any] | None = None
        self._ranking: psycopg.Cursor[Any] | None = None
        self._speculating = False

    def send(self, conn: Conn) -> None:
        """Send the statement that counts what ``stats`` does not know (``result`` reads it)."""
        if self.ready:
            return
        parts = [
            "(SELECT count(*) FROM (SELECT 1 FROM memories WHERE scope_key = %s AND deleted_at_ms IS NULL "
            "AND terms @> %s LIMIT %s) AS t)"
            for _ in self.unknown
        ]
        params: list[object] = []
        for term in self.unknown:
            params += [self.key, self.term_tokens[term], COMMON_DOCS]
        if self.size is None:
            parts.append(
                "(SELECT count(*) FROM (SELECT 1 FROM memories WHERE scope_key = %s AND deleted_at_ms IS NULL "
                "LIMIT %s) AS s)"
            )
            params += [self.key, COMMON_DOCS]
        self._cursor = conn.execute("SELECT " + ", ".join(parts), params)

    def send_ranking(self, conn: Conn, scope: Scope, depth: int, now_ms: int) -> None:
        """Send the keyword candidates' statement: ``keyword_statement`` when every count is
        known, else ``_speculative_statement`` (which measures the rest itself)."""
        if self.ready:
            counts, size = self.result()
            statement = keyword_statement(scope, self.key, self.term_tokens, depth, now_ms, counts, size)
            self._ranking = conn.execute(*statement) if statement is not None else None
            return
        statement = _speculative_statement(scope, self.key, self.term_tokens, depth, now_ms, self.unknown, self.size)
        self._ranking = conn.execute(*statement)
        self._speculating = True

    def ranking_rows(self, conn: Conn, scope: Scope, depth: int, now_ms: int) -> list[tuple[int, int, float]]:
        """The rows ``keyword_statement`` gives; when a guessed-rare term turned out common, that
        statement runs now (one more round trip, until ``stats`` knows the term)."""
        if self._ranking is None:
            return []
        rows = self._ranking.fetchall()
        self._ranking = None
        if not self._speculating:
            return rows
        self._speculating = False
        values = {int(index): int(count) for part, index, count in rows if part == -1}
        guessed = self.unknown
        self._learn([values[i] for i in range(len(guessed))], values[-1] if self.size is None else None)
        # With more matches than one read holds, the counts were measured on their own and the
        # rows ranked are not all of them.
        if values[-2] < RECENT_WINDOW and all(self.counts[t] < COMMON_DOCS for t in guessed):
            return [row for row in rows if row[0] >= 0]
        counts, size = self.result()
        statement = keyword_statement(scope, self.key, self.term_tokens, depth, now_ms, counts, size)
        return conn.execute(*statement).fetchall() if statement is not None else []

    @property
    def ready(self) -> bool:
        """Whether every count is known without a statement."""
        return not self.unknown and self.size is not None

    def _learn(self, counts: list[int], size: int | None) -> None:
        for term, count in zip(self.unknown, counts, strict=True):
            self.counts[term] = count
            if count >= COMMON_DOCS and self.stats is not None:
                self.stats.put(True, "term", self.key, tuple(self.term_tokens[term]), COMMON_DOCS)
        if size is not None:
            self.size = size
            if size >= COMMON_DOCS and self.stats is not None:
                self.stats.put(True, "size", self.key, COMMON_DOCS)
        self.unknown = []

    def result(self) -> tuple[dict[str, int], int]:
        """(counts, size), the terms in the query's order."""
        if self._cursor is not None:
            values = [int(v) for v in self._cursor.fetchone() or ()]
            self._cursor = None
            self._learn(values[: len(self.unknown)], values[-1] if self.size is None else None)
        return {t: self.counts[t] for t in self.term_tokens}, int(self.size or 0)


def measure(conn: Conn, key: str, term_tokens: dict[str, list[str]]) -> tuple[dict[str, int], int]:
    """Each term's document count in scope key ``key`` and the key's size, capped at COMMON_DOCS."""
    measuring = Measuring(key, term_tokens, None)
    measuring.send(conn)
    return measuring.result()


def _bm25_statement(
    scope: Scope,
    key: str,
    term_tokens: dict[str, list[str]],
    depth: int,
    now_ms: int,
    counts: dict[str, int],
    size: int,
    present: list[str],
) -> Statement:
    """The ``depth`` best visible matches of ``present`` in scope key ``key`` by FTS5's BM25
    formula, computed by the server from the stored term frequencies, over the scope's newest
    RECENT_WINDOW matches: (rowid, score), lower is better, as FTS5's."""
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


def _window_statement(
    scope: Scope, key: str, term_tokens: dict[str, list[str]], depth: int, now_ms: int, present: list[str], gate: str
) -> Statement:
    """The SQLite backend's plan for common terms: the scope key's newest RECENT_WINDOW matches
    of any term, ranked by the summed IDF (FTS5's formula, the window standing for the table)
    of the terms each holds, newer first among equals; what the caller may see of them.  A
    one-term-frequency, average-length document scores that under BM25, so the scores merge
    with BM25's.  ``gate``: a condition that skips the scan when false (SQL, no parameters)."""
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


def keyword_statement(
    scope: Scope,
    key: str,
    term_tokens: dict[str, list[str]],
    depth: int,
    now_ms: int,
    counts: dict[str, int],
    size: int,
) -> Statement | None:
    """The keyword candidates of one scope key as one statement, rows of (part, rowid, score):
    part 0 the BM25 hits, part 1 the recent window's.

    The SQLite backend's plan: with only rare terms (fewer than COMMON_DOCS matches each in the
    scope), every match is ranked; otherwise the rare terms rank alone (common terms have an IDF
    near zero, they barely move BM25), and only when they find fewer than ``depth`` is the
    recent window of every term ranked (the server skips it otherwise)."""
    present = [t for t in term_tokens if counts.get(t, 0) > 0]
    if not present:
        return None
    rare = [t for t in present if counts[t] < COMMON_DOCS]
    if rare:
        bm25, bm25_params = _bm25_statement(scope, key, term_tokens, depth, now_ms, counts, size, rare)
    if len(rare) == len(present):
        return f"SELECT 0 AS part, rowid, score FROM ({bm25}) AS r", bm25_params
    if not rare:
        window, params = _window_statement(scope, key, term_tokens, depth, now_ms, present, "true")
        return f"SELECT 1 AS part, rowid, score FROM {window} AS c", params
    window, params = _window_statement(
        scope, key, term_tokens, depth, now_ms, present, f"(SELECT count(*) FROM r) < {int(depth)}"
    )
    return (
        f"WITH r AS MATERIALIZED ({bm25}) SELECT 0 AS part, rowid, score FROM r "
        f"UNION ALL SELECT 1 AS part, rowid, score FROM {window} AS c ORDER BY part, score, rowid DESC",
        (*bm25_params, *params),
    )


def _speculative_statement(
    scope: Scope,
    key: str,
    term_tokens: dict[str, list[str]],
    depth: int,
    now_ms: int,
    unknown: list[str],
    size: int | None,
) -> Statement:
    """``keyword_statement`` for a scope key whose terms ``unknown`` are not known to be common,
    assuming they are rare: one read of their newest RECENT_WINDOW matches gives their counts
    (all of them, when the read holds fewer; else each term's is measured on its own, capped at
    COMMON_DOCS, in the same statement) and the rows their BM25 ranks, with the IDFs of those
    counts.  Its rows: (-1, term's index in ``unknown``, count), (-1, -1, the key's size),
    (-1, -2, the matches read), then ``keyword_statement``'s.  Right when every count is below
    COMMON_DOCS and fewer than RECENT_WINDOW matches were read (the caller checks)."""
    n = len(unknown)
    shown, visible = predicate(scope, now_ms=now_ms, key=key)
    if size is None:
        sizing = (
            "(SELECT count(*) FROM (SELECT 1 FROM memories WHERE scope_key = %s AND deleted_at_ms IS NULL "
            "LIMIT %s) AS s)"
        )
        size_params: list[object] = [key, COMMON_DOCS]
    else:
        sizing, size_params = f"{int(size)}::bigint", []
    alternatives = " OR ".join("m.terms @> %s" for _ in unknown)
    # Each term's count from the read; when the read is full (older matches left unread), the
    # term's own capped count (``Measuring.send``'s), which the server runs only then.
    counted = ", ".join(
        f"CASE WHEN count(*) < {RECENT_WINDOW} THEN least(count(*) FILTER (WHERE terms @> %s), {COMMON_DOCS}) "
        "ELSE (SELECT count(*) FROM (SELECT 1 FROM memories WHERE scope_key = %s AND deleted_at_ms IS NULL "
        f"AND terms @> %s LIMIT {COMMON_DOCS}) AS t) END AS c{i}"
        for i in range(n)
    )
    # ``_bm25_statement``'s IDF, from the counts measured here (terms found nowhere match no row).
    docs = f"greatest(c.size, {', '.join(f'c.c{i}' for i in range(n))})"
    idfs = ", ".join(
        f"greatest(1e-6, ln((({docs} - c.c{i})::float8 + 0.5) / (c.c{i}::float8 + 0.5))) AS i{i}" for i in range(n)
    )
    freqs = ", ".join(f"w.term_freqs[array_position(w.terms, %s)] AS f{i}" for i in range(n))
    parts = " + ".join(
        f"coalesce(i.i{i} * f{i} * {K1 + 1} / (f{i} + {K1} * ({1 - B} + {B} * doc_len / a.avg_len)), 0)"
        for i in range(n)
    )
    counts = " UNION ALL ".join(
        [f"SELECT -1, {i}, c.c{i}::float8 FROM c" for i in range(n)]
        + ["SELECT -1, -1, c.size::float8 FROM c", "SELECT -1, -2, c.matches::float8 FROM c"]
    )
    sql = (
        "WITH m0 AS MATERIALIZED (SELECT m.rowid, m.terms, m.term_freqs, m.doc_len, "
        f"({shown}) AS shown FROM memories AS m WHERE m.scope_key = %s AND m.deleted_at_ms IS NULL "
        f"AND ({alternatives}) ORDER BY m.rowid DESC LIMIT %s), "
        f"c AS MATERIALIZED (SELECT {counted}, count(*) AS matches, {sizing} AS size FROM m0), "
        f"i AS (SELECT {idfs} FROM c), "
        "w AS (SELECT rowid, terms, term_freqs, doc_len FROM m0 WHERE shown), "
        "a AS (SELECT greatest(avg(doc_len), 1e-6) AS avg_len FROM w), "
        f"r AS MATERIALIZED (SELECT rowid, -({parts}) AS score FROM (SELECT w.rowid, w.doc_len, {freqs} FROM w "
        "OFFSET 0) AS f CROSS JOIN a CROSS JOIN i ORDER BY score, rowid DESC LIMIT %s) "
        f"{counts} UNION ALL SELECT 0 AS part, rowid, score FROM r"
    )
    tokens_ = [term_tokens[t] for t in unknown]
    params: list[object] = [*visible, key, *tokens_, RECENT_WINDOW]
    for found in tokens_:
        params += [found, key, found]
    params += size_params
    params += [*[term_tokens[t][0] for t in unknown], depth]
    common = [t for t in term_tokens if t not in unknown]
    if common:
        window, window_params = _window_statement(
            scope, key, term_tokens, depth, now_ms, [*common, *unknown], f"(SELECT count(*) FROM r) < {int(depth)}"
        )
        sql += f" UNION ALL SELECT 1 AS part, rowid, score FROM {window} AS x"
        params += window_params
    return sql + " ORDER BY 1, 3, 2 DESC", tuple(params)


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


# -- people retriever ------------------------------------------------------------------------


def _people_statement(scope: Scope, focus: PeopleFocus, now_ms: int) -> Statement:
    """The newest RANK_POOL visible memories linked to the focus's people."""
    where, params = predicate(scope, now_ms=now_ms)
    return (
        f"SELECT m.rowid, m.content, m.subjects FROM memories AS m WHERE {where} AND m.rowid IN "
        "(SELECT memory_rowid FROM memory_people WHERE person_rowid = ANY(%s)) "
        "ORDER BY m.created_at_ms DESC, m.rowid DESC LIMIT %s",
        (*params, list(focus.ranked_people), RANK_POOL),
    )


def _people_order(rows: Sequence[Sequence[Any]], focus: PeopleFocus, depth: int) -> list[int]:
    """The pool, those sharing the most of the question's other words first."""
    pool = [(int(rowid), _text(content, subjects)) for rowid, content, subjects in rows]
    pool = query_terms.by_shared_words(pool, focus.rest)
    return [rowid for rowid, _ in pool[:depth]]


def people_ranking(conn: Conn, scope: Scope, focus: PeopleFocus | None, depth: int, now_ms: int) -> list[int]:
    if focus is None or not focus.ranked_people:
        return []
    return _people_order(conn.execute(*_people_statement(scope, focus, now_ms)).fetchall(), focus, depth)


def restrict(conn: Conn, focus: PeopleFocus | None, fused: list[tuple[int, float]]) -> list[tuple[int, float]]:
    if focus is None or focus.only is None:
        return fused
    if not focus.only or not fused:
        return []
    linked = {
        int(rowid)
        for (rowid,) in conn.execute(
            "SELECT DISTINCT memory_rowid FROM memory_people WHERE person_rowid = ANY(%s) AND memory_rowid = ANY(%s)",
            (list(focus.only), [rowid for rowid, _ in fused]),
        )
    }
    return [(rowid, score) for rowid, score in fused if rowid in linked]


# -- vectors ---------------------------------------------------------------------------------


#: A scope key with at least this many vectors is searched through the HNSW index of its
#: generation (iterative scans, so the scope filter never starves the result); smaller ones
#: exactly, through the primary key's range of the scope (recall 1.00, and faster there).
HNSW_FROM = 5000
#: The HNSW candidates a scan keeps (pgvector's ef_search; iterative scans go past it as needed).
EF_SEARCH = 100


def hnsw_index(generation: int) -> str:
    return f"memory_vectors_hnsw_{int(generation)}"


def hnsw_definition(generation: int, dim: int) -> str:
    """The HNSW index of ``generation``'s vectors: over the vectors cast to half precision
    (``halfvec`` of their length: the column itself has none), which halves the index and its
    build and makes a scan 2-4x faster for the same recall; the distances a search returns are
    the float32 vectors' own (``_knn_statement``)."""
    return (
        f"CREATE INDEX IF NOT EXISTS {hnsw_index(generation)} ON memory_vectors "
        f"USING hnsw ((embedding::halfvec({int(dim)})) halfvec_cosine_ops) WHERE generation = {int(generation)}"
    )


def _size_statement(key: str, generation: int) -> Statement:
    return (
        "SELECT count(*) FROM (SELECT 1 FROM memory_vectors WHERE scope_key = %s AND generation = %s LIMIT %s) AS v",
        (key, generation, HNSW_FROM),
    )


def _big(conn: Conn, key: str, generation: int) -> bool:
    (count,) = conn.execute(*_size_statement(key, generation)).fetchone() or (0,)
    return int(count) >= HNSW_FROM


def knn(
    conn: Conn, scope: Scope, unit: npt.NDArray[np.float32], generation: int, k: int, now_ms: int
) -> list[tuple[int, float]]:
    """(rowid, cosine) of the ``k`` nearest visible memories, best first: one branch per visible
    scope key, each with its own ORDER BY ... LIMIT (exact for small keys, HNSW for big ones)."""
    bigs = {key: _big(conn, key, generation) for key in scope.visible_keys()}
    return _nearest(_issue_knn(conn, scope, unit, generation, k, now_ms, bigs))


def explain_knn(conn: Conn, scope: Scope, unit: npt.NDArray[np.float32], generation: int, k: int, now_ms: int) -> str:
    """The plan ``knn`` runs (tests check the big scopes' branch uses the HNSW index)."""
    bigs = {key: _big(conn, key, generation) for key in scope.visible_keys()}
    sql, bindings = _knn_statement(scope, unit, generation, k, now_ms, bigs)
    approximate = any(bigs.values())
    if approximate:
        conn.execute(*_index_scans(k))
    plan = "\n".join(str(row[0]) for row in conn.execute("EXPLAIN " + sql, bindings))
    if approximate:
        conn.execute(_SORT_AGAIN)
    return plan


def _knn_statement(
    scope: Scope, unit: npt.NDArray[np.float32], generation: int, k: int, now_ms: int, bigs: dict[str, bool]
) -> Statement:
    selects: list[str] = []
    bindings: list[object] = []
    for key in scope.visible_keys():
        where, params = predicate(scope, now_ms=now_ms, key=key)
        order, ordering = "distance", []
        if bigs[key]:
            # The index's own expression (``hnsw_definition``), so the planner can use it; the
            # distance returned is still the float32 vectors'.
            order, ordering = f"v.embedding::halfvec({unit.size}) <=> %s::halfvec({unit.size})", [unit]
        selects.append(
            "(SELECT v.rowid, v.embedding <=> %s AS distance FROM memory_vectors AS v JOIN memories AS m "
            "ON m.scope_key = v.scope_key AND m.rowid = v.rowid "
            f"WHERE v.scope_key = %s AND v.generation = {int(generation)} AND {where} ORDER BY {order} LIMIT %s)"
        )
        bindings += [unit, key, *params, *ordering, k]
    sql = f"SELECT rowid, distance FROM ({' UNION ALL '.join(selects)}) AS near ORDER BY distance, rowid DESC LIMIT %s"
    return sql, (*bindings, k)


def _index_scans(k: int) -> Statement:
    """For a big scope's branch: iterative HNSW scans (the scope filter never starves the
    result; pgvector 0.8), and no sort of the scope's rows instead of the index (the planner
    underestimates the index's selectivity on a filtered scan); for this transaction."""
    return (
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.ef_search', %s, true), set_config('enable_sort', 'off', true)",
        (str(max(EF_SEARCH, min(k, 1000))),),
    )


#: After the KNN: sorts as before for the rest of the transaction.
_SORT_AGAIN = "SELECT set_config('enable_sort', 'on', true)"


def _issue_knn(
    conn: Conn,
    scope: Scope,
    unit: npt.NDArray[np.float32],
    generation: int,
    k: int,
    now_ms: int,
    bigs: dict[str, bool],
) -> psycopg.Cursor[Any]:
    """Send the KNN (its settings around it, when a branch uses the index); its cursor, whose
    rows ``_nearest`` reads (in pipeline mode, the statements go with the next round trip)."""
    approximate = any(bigs.values())
    if approximate:
        conn.execute(*_index_scans(k))
    cursor = conn.execute(*_knn_statement(scope, unit, generation, k, now_ms, bigs))
    if approximate:
        conn.execute(_SORT_AGAIN)
    return cursor


def _nearest(cursor: psycopg.Cursor[Any]) -> list[tuple[int, float]]:
    return [(int(rowid), 1.0 - float(distance)) for rowid, distance in cursor.fetchall()]


def cosines_for(conn: Conn, rowids: Sequence[int], unit: npt.NDArray[np.float32], generation: int) -> dict[int, float]:
    if not rowids:
        return {}
    rows = conn.execute(
        "SELECT rowid, embedding <=> %s FROM memory_vectors WHERE rowid = ANY(%s) AND generation = %s",
        (unit, list(rowids), generation),
    )
    return {int(rowid): 1.0 - float(distance) for rowid, distance in rows}


# -- neighbours ------------------------------------------------------------------------------


def _around_statement(
    scope: Scope,
    wanted: list[int],
    reach: int,
    now_ms: int,
    unit: npt.NDArray[np.float32] | None,
    generation: int | None,
) -> Statement:
    near_sql, near_params = predicate(scope, "s", now_ms=now_ms)
    centre_sql, centre_params = predicate(scope, "c", now_ms=now_ms)
    sql = (
        "SELECT c.rowid AS centre, c.scope_key, n.rowid, n.content, n.subjects, n.created_at_ms, n.side "
        "FROM memories AS c CROSS JOIN LATERAL ("
        "(SELECT s.rowid, s.content, s.subjects, s.created_at_ms, -1 AS side FROM memories AS s "
        f"WHERE s.scope_key = c.scope_key AND {near_sql} AND (s.created_at_ms, s.rowid) < (c.created_at_ms, c.rowid) "
        "ORDER BY s.created_at_ms DESC, s.rowid DESC LIMIT %s) UNION ALL "
        "(SELECT s.rowid, s.content, s.subjects, s.created_at_ms, 1 FROM memories AS s "
        f"WHERE s.scope_key = c.scope_key AND {near_sql} AND (s.created_at_ms, s.rowid) > (c.created_at_ms, c.rowid) "
        "ORDER BY s.created_at_ms, s.rowid LIMIT %s) UNION ALL "
        "SELECT c.rowid, c.content, c.subjects, c.created_at_ms, 0) AS n "
        f"WHERE c.rowid = ANY(%s) AND {centre_sql}"
    )
    params = (*near_params, reach, *near_params, reach, wanted, *centre_params)
    if unit is None or generation is None:
        return f"SELECT centre, rowid, content, subjects, created_at_ms, NULL FROM ({sql}) AS h", params
    # The cosines the ranking can read come with the rows: each candidate's and those of the
    # rows right before and after it (the ones it may join, ``_worth_a_cosine``).
    return (
        "SELECT h.centre, h.rowid, h.content, h.subjects, h.created_at_ms, CASE WHEN h.side = 0 OR "
        "row_number() OVER (PARTITION BY h.centre, h.side ORDER BY h.side * h.created_at_ms, h.side * h.rowid) = 1 "
        "THEN (SELECT v.embedding <=> %s FROM memory_vectors AS v WHERE v.scope_key = h.scope_key "
        f"AND v.rowid = h.rowid AND v.generation = {int(generation)}) END FROM ({sql}) AS h",
        (unit, *params),
    )


def _neighbourhood(wanted: list[int], rows: Sequence[Sequence[Any]]) -> tuple[Neighbourhood, dict[int, float]]:
    hood = Neighbourhood(centres=set(wanted))
    cosines: dict[int, float] = {}
    chains: dict[int, list[tuple[int, int]]] = {}
    for centre, rowid, content, subjects, created, distance in rows:
        rowid = int(rowid)
        if rowid not in hood.rows:
            hood.rows[rowid] = Row(rowid, _text(content, subjects), int(created))
        if distance is not None:
            cosines[rowid] = 1.0 - float(distance)
        chains.setdefault(int(centre), []).append((int(created), rowid))
    for chain in chains.values():
        chain.sort()
        for (_, first), (_, second) in itertools.pairwise(chain):
            hood.link(hood.rows[first], hood.rows[second])
    return hood, cosines


def around(conn: Conn, scope: Scope, rowids: Sequence[int], reach: int, now_ms: int) -> Neighbourhood:
    """The rows ``scope`` sees within ``reach`` positions of each of ``rowids`` in its scope key."""
    wanted = list(dict.fromkeys(rowids))
    if not wanted:
        return Neighbourhood(centres=set())
    rows = conn.execute(*_around_statement(scope, wanted, reach, now_ms, None, None)).fetchall()
    return _neighbourhood(wanted, rows)[0]


# -- the search ------------------------------------------------------------------------------


def _worth_a_cosine(
    adjacent: list[int],
    pool_features: npt.NDArray[np.float64],
    cosines: dict[int, float],
    table: ranking.FeatureTable,
    limit: int,
) -> list[int]:
    if not adjacent or len(pool_features) < limit:
        return adjacent
    best = max(cosines.values(), default=0.0)
    optimistic = table.matrix(adjacent, dict.fromkeys(adjacent, best))
    bar = np.sort(ranking.scores(pool_features))[-limit]
    return [rowid for rowid, score in zip(adjacent, ranking.scores(optimistic), strict=True) if score >= bar]


def search(
    conn: Conn,
    scope: Scope,
    text: str,
    limit: int,
    unit: npt.NDArray[np.float32] | None,
    generation: int | None,
    focus: PeopleFocus | None,
    now_ms: int,
    min_relevance: float = 0.0,
    stats: ScopeStats | None = None,
) -> list[SearchHit]:
    """Hybrid search as the SQLite engine ranks it; each hit carries ``relevance``
    (store/relevance.py, from the same ranking features), hits below ``min_relevance`` left out.

    With ``unit``, the vectors of ``generation`` are searched when it is still the store's (else
    keyword results only).  ``stats``: what earlier searches learned of the scope keys."""
    if limit < 1:
        return []
    # On a connection in autocommit mode (``Database.run_sync(..., own_transaction=True)``) the
    # search is its own transaction, BEGIN sent with the first statements, COMMIT with the last.
    own = conn.autocommit
    with conn.pipeline():
        if own:
            conn.execute("BEGIN")
        ranked, cosines, relevant, terms, records = _search(
            conn, scope, text, limit, unit, generation, focus, now_ms, min_relevance, stats
        )
        if own:
            conn.execute("COMMIT")
    # The records were read as the pipeline ended.
    found = _records(records.fetchall()) if records is not None else {}
    hide_unseen_successors(conn, scope, found.values())
    hits: list[SearchHit] = []
    for rowid, score in ranked:
        found_record = found.get(rowid)
        if found_record is None:
            continue
        if rowid in cosines:
            similarity = min(1.0, max(0.0, cosines[rowid]))
        else:
            similarity = query_terms.term_fraction(terms, found_record.content, " ".join(found_record.subjects))
        hits.append(hit_from_record(found_record, score, similarity, relevant.get(rowid, 0.0)))
    return hits


def _search(
    conn: Conn,
    scope: Scope,
    text: str,
    limit: int,
    unit: npt.NDArray[np.float32] | None,
    generation: int | None,
    focus: PeopleFocus | None,
    now_ms: int,
    min_relevance: float,
    stats: ScopeStats | None,
) -> tuple[list[tuple[int, float]], dict[int, float], dict[int, float], list[str], psycopg.Cursor[Any] | None]:
    """The ranked rowids with what their hits are built from: the cosines, the relevances, the
    query's terms and the records' statement, sent, not yet read."""
    terms = query_terms.extract_terms(text)
    term_tokens = _term_tokens(terms)
    depth = candidate_depth(limit)
    keys = scope.visible_keys()

    # Round trip 1: the generation, the keyword candidates, the KNN (or the sizes that choose its plan).
    current = conn.execute("SELECT value FROM meta WHERE key = 'vector_generation'") if generation is not None else None
    # Each scope key's keyword candidates, its unknown counts measured by the same statement.
    measuring = [Measuring(key, term_tokens, stats) for key in keys] if term_tokens else []
    for each in measuring:
        each.send_ranking(conn, scope, depth, now_ms)
    people = (
        conn.execute(*_people_statement(scope, focus, now_ms)) if focus is not None and focus.ranked_people else None
    )
    bigs: dict[str, bool] = {}
    sizing: dict[str, psycopg.Cursor[Any]] = {}
    nearest_cursor: psycopg.Cursor[Any] | None = None
    if unit is not None and generation is not None:
        for key in keys:
            big = stats.big(key, generation) if stats is not None else None
            if big is None:
                sizing[key] = conn.execute(*_size_statement(key, generation))
            else:
                bigs[key] = big
        if not sizing:
            nearest_cursor = _issue_knn(conn, scope, unit, generation, coarse_k(depth), now_ms, bigs)
    semantic = unit is not None and generation is not None
    if current is not None:
        found_generation = current.fetchone()
        if found_generation is None or int(found_generation[0]) != generation:
            log.warning("search: vector space changed under this process; keyword results only")
            semantic, nearest_cursor = False, None
    per_key = [keyword_hits(each.ranking_rows(conn, scope, depth, now_ms), depth) for each in measuring]
    measured = [each.result() for each in measuring]
    if semantic and sizing:
        assert unit is not None and generation is not None
        for key, cursor in sizing.items():
            (count,) = cursor.fetchone() or (0,)
            bigs[key] = int(count) >= HNSW_FROM
            if stats is not None:
                stats.put(bigs[key], "vectors", key, generation, HNSW_FROM)
        nearest_cursor = _issue_knn(conn, scope, unit, generation, coarse_k(depth), now_ms, bigs)

    by_words = merge_keys(per_key, depth)
    by_people = _people_order(people.fetchall(), focus, depth) if people is not None and focus is not None else []
    summed: dict[str, int] = {}
    for counts, _ in measured:
        for term, count in counts.items():
            summed[term] = summed.get(term, 0) + count
    weights = TermWeights(tokens.tokens, terms, summed, sum(size for _, size in measured))

    cosines: dict[int, float] = {}
    by_vector: list[int] = []
    if semantic and nearest_cursor is not None:
        nearest = _nearest(nearest_cursor)
        by_vector = [rowid for rowid, _ in nearest[:depth]]
        cosines = dict(nearest)

    # Round trip 2: the candidates' neighbourhood, every row with its cosine.
    found = list(dict.fromkeys([*by_words, *by_vector, *by_people]))
    hood, hood_cosines = Neighbourhood(centres=set()), dict[int, float]()
    if found:
        statement = _around_statement(
            scope, found, REACH, now_ms, unit if semantic else None, generation if semantic else None
        )
        hood, hood_cosines = _neighbourhood(found, conn.execute(*statement).fetchall())
    pool = [rowid for rowid in found if rowid in hood.rows]
    known = set(pool)
    adjacent = list(
        dict.fromkeys(
            n for rowid in pool for n in (hood.walk(rowid, -1), hood.walk(rowid, 1)) if n is not None and n not in known
        )
    )
    if semantic:
        cosines.update({r: hood_cosines[r] for r in pool if r not in cosines and r in hood_cosines})
    table = ranking.FeatureTable(hood, weights.coverage)
    features = table.matrix(pool, cosines)
    if semantic:
        adjacent = _worth_a_cosine(adjacent, features, cosines, table, limit)
        cosines.update({r: hood_cosines[r] for r in adjacent if r not in cosines and r in hood_cosines})
    joining = [rowid for rowid in adjacent if rowid in cosines or table.coverage(rowid) > 0]
    features = np.vstack([features, table.matrix(joining, cosines)])
    rowids = pool + joining
    created = {rowid: hood.rows[rowid].created_at_ms for rowid in rowids}

    scored = dict(zip(rowids, ranking.scores(features).tolist(), strict=True))
    relevant = relevance.by_rowid(rowids, features, cosines)
    texts = {rowid: hood.rows[rowid].text for rowid in rowids}
    ranked = ranking.search_order(scored, cosines, terms, features, text, texts)
    if by_people:
        # Each place keeps the score of the model's same place, so scores still fall down the list.
        places = sorted((score for _, score in ranked), reverse=True)
        fused = fuse([by_people, [r for r, _ in ranked]])
        places += [0.0] * (len(fused) - len(places))
        ranked = list(zip(fused, places, strict=True))
    # Below the floor a memory is left out, whoever retrieved it.
    ranked = relevance.at_least(ranked, relevant, min_relevance)
    ranked = ranking.diversify(restrict(conn, focus, ranked), created)[:limit]

    # Round trip 3: the hits' records, each with the people it is about.
    return ranked, cosines, relevant, terms, _send_records(conn, scope, [rowid for rowid, _ in ranked], now_ms)


#: The caller's own people a memory is linked to, by the person's age (``annotate``'s names).
_ABOUT = (
    "ARRAY(SELECT p.name FROM memory_people AS mp JOIN people AS p ON p.rowid = mp.person_rowid "
    "AND p.scope_key = mp.scope_key WHERE mp.memory_rowid = m.rowid AND p.owner = %s ORDER BY p.rowid)"
)


def _send_records(conn: Conn, scope: Scope, rowids: Sequence[int], now_ms: int) -> psycopg.Cursor[Any] | None:
    """``fetch_visible`` and ``annotate``'s names in one statement (``_records`` reads it)."""
    if not rowids:
        return None
    where, params = predicate(scope, now_ms=now_ms)
    return conn.execute(
        f"SELECT {RECORD_COLUMNS}, {_ABOUT} FROM memories AS m WHERE m.rowid = ANY(%s) AND {where}",
        (scope.user_id, list(rowids), *params),
    )


def _records(rows: Sequence[Sequence[Any]]) -> dict[int, MemoryRecord]:
    found: dict[int, MemoryRecord] = {}
    for row in rows:
        memory = record(row[:-1])
        if row[-1]:
            memory.about = list(row[-1])
        found[int(row[0])] = memory
    return found


def annotate(conn: Conn, scope: Scope, records: Any) -> None:
    """``about`` of each record: the caller's own people it is linked to (else its subjects).
    What a record says of a newer memory that replaced it is kept only when ``scope`` may see
    that memory: every path that answers records comes through here."""
    by_id = {record.id: record for record in records}
    if not by_id:
        return
    hide_unseen_successors(conn, scope, by_id.values())
    rows = conn.execute(
        "SELECT m.id, p.name FROM memories AS m JOIN memory_people AS mp ON mp.memory_rowid = m.rowid "
        "JOIN people AS p ON p.rowid = mp.person_rowid AND p.scope_key = mp.scope_key "
        "WHERE m.id = ANY(%s) AND p.owner = %s ORDER BY p.rowid",
        (list(by_id), scope.user_id),
    )
    names: dict[str, list[str]] = {}
    for memory_id, name in rows:
        names.setdefault(memory_id, []).append(name)
    for memory_id, found in names.items():
        by_id[memory_id].about = found
