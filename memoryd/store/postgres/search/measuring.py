"""What a scope key's keyword candidates need to know first: each query term's document count
and the key's size, capped at COMMON_DOCS.

A count the daemon has kept (``ScopeStats``) costs nothing; the rest are measured by the same
statement that ranks the key's candidates, assuming the unknown terms are rare (nearly all are).
When one turns out common, the key's ``keyword_statement`` runs in one more round trip.
"""

from __future__ import annotations

from typing import Any

import psycopg

from memoryd.store.postgres.search.keyword import (
    COMMON_DOCS,
    K1,
    RECENT_WINDOW,
    B,
    KeyQuery,
    Statement,
    keyword_statement,
    window_statement,
)
from memoryd.store.postgres.search.scope_stats import ScopeStats
from memoryd.store.postgres.visibility import predicate
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]


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
        known, else ``speculative_statement`` (which measures the rest itself)."""
        if self.ready:
            counts, size = self.result()
            statement = keyword_statement(self._query(scope, depth, now_ms), counts, size)
            self._ranking = conn.execute(*statement) if statement is not None else None
            return
        statement = speculative_statement(self._query(scope, depth, now_ms), self.unknown, self.size)
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
        statement = keyword_statement(self._query(scope, depth, now_ms), counts, size)
        return conn.execute(*statement).fetchall() if statement is not None else []

    def _query(self, scope: Scope, depth: int, now_ms: int) -> KeyQuery:
        return KeyQuery(scope, self.key, self.term_tokens, depth, now_ms)

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


def speculative_statement(query: KeyQuery, unknown: list[str], size: int | None) -> Statement:
    """``keyword_statement`` for a scope key whose terms ``unknown`` are not known to be common,
    assuming they are rare: one read of their newest RECENT_WINDOW matches gives their counts
    (all of them, when the read holds fewer; else each term's is measured on its own, capped at
    COMMON_DOCS, in the same statement) and the rows their BM25 ranks, with the IDFs of those
    counts.  Its rows: (-1, term's index in ``unknown``, count), (-1, -1, the key's size),
    (-1, -2, the matches read), then ``keyword_statement``'s.  Right when every count is below
    COMMON_DOCS and fewer than RECENT_WINDOW matches were read (the caller checks)."""
    scope, key, term_tokens, depth, now_ms = query
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
    # ``keyword.bm25_statement``'s IDF, from the counts measured here (terms found nowhere match no row).
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
        window, window_params = window_statement(query, [*common, *unknown], f"(SELECT count(*) FROM r) < {int(depth)}")
        sql += f" UNION ALL SELECT 1 AS part, rowid, score FROM {window} AS x"
        params += window_params
    return sql + " ORDER BY 1, 3, 2 DESC", tuple(params)
