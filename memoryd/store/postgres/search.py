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
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import psycopg

from memoryd.store import ranking
from memoryd.store.fusion import fuse
from memoryd.store.neighbourhood import Neighbourhood, Row
from memoryd.store.people_records import PeopleFocus
from memoryd.store.postgres import tokens
from memoryd.store.postgres.memories import fetch_visible
from memoryd.store.postgres.visibility import predicate
from memoryd.store.records import SearchHit, hit_from_record
from memoryd.store.sqlite.search import fts_query
from memoryd.store.sqlite.search.term_match import TermWeights
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]
_decode = msgspec.json.decode

#: A term matching at least this many of a scope's documents counts as common.
COMMON_DOCS = 1000
#: With only common terms, the newest this-many matches are ranked.
RECENT_WINDOW = 5000
REACH = ranking.WINDOW + 1
K1, B = 1.2, 0.75
SUBJECT_WEIGHT = 0.5
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


def _term_tokens(terms: list[str]) -> dict[str, list[str]]:
    return {term: found for term in terms if (found := tokens.query_tokens(term))}


def measure(conn: Conn, key: str, term_tokens: dict[str, list[str]]) -> tuple[dict[str, int], int]:
    """Each term's document count in scope key ``key`` and the key's size, capped at COMMON_DOCS."""
    parts = [
        "(SELECT count(*) FROM (SELECT 1 FROM memories WHERE scope_key = %s AND deleted_at_ms IS NULL "
        "AND terms @> %s LIMIT %s) AS t)"
        for _ in term_tokens
    ]
    parts.append("(SELECT count(*) FROM (SELECT 1 FROM memories WHERE scope_key = %s AND deleted_at_ms IS NULL LIMIT %s) AS s)")
    params: list[object] = []
    for found in term_tokens.values():
        params += [key, found, COMMON_DOCS]
    params += [key, COMMON_DOCS]
    row = conn.execute("SELECT " + ", ".join(parts), params).fetchone() or ()
    values = [int(v) for v in row]
    return dict(zip(term_tokens, values[:-1], strict=True)), values[-1]


def _bm25(
    rows: list[tuple[int, str, str]], term_tokens: dict[str, list[str]], present: list[str], docs: int, counts: dict[str, int]
) -> list[tuple[int, float]]:
    """FTS5's bm25() over ``rows`` (lower is better, as FTS5's), the scope standing for the table."""
    if not rows:
        return []
    parsed = []
    total_len = 0.0
    for rowid, content, subjects in rows:
        content_tokens = tokens.tokens(content)
        subject_tokens = [t for s in (_decode(subjects) if subjects and subjects != "[]" else []) for t in tokens.tokens(s)]
        length = len(content_tokens) + SUBJECT_WEIGHT * len(subject_tokens)
        total_len += length
        parsed.append((rowid, content_tokens, subject_tokens, length))
    avg = max(total_len / len(parsed), 1e-6)
    idfs = {term: max(1e-6, math.log((max(docs, counts[term]) - counts[term] + 0.5) / (counts[term] + 0.5))) for term in present}
    scored = []
    for rowid, content_tokens, subject_tokens, length in parsed:
        score = 0.0
        for term in present:
            first = term_tokens[term][0]
            tf = content_tokens.count(first) + SUBJECT_WEIGHT * subject_tokens.count(first)
            if tf:
                score += idfs[term] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))
        if score > 0:
            scored.append((rowid, -score))
    scored.sort(key=lambda hit: (hit[1], -hit[0]))
    return scored


def _matches(conn: Conn, scope: Scope, key: str, wanted: list[list[str]], now_ms: int, limit: int) -> list[tuple[int, str, str]]:
    where, params = predicate(scope, now_ms=now_ms, key=key)
    alternatives = " OR ".join("m.terms @> %s" for _ in wanted)
    rows = conn.execute(
        f"SELECT m.rowid, m.content, m.subjects FROM memories AS m WHERE {where} AND ({alternatives}) "
        "ORDER BY m.rowid DESC LIMIT %s",
        (*params, *wanted, limit),
    ).fetchall()
    return [(int(r), c, s) for r, c, s in rows]


def _scope_candidates(
    conn: Conn, scope: Scope, key: str, term_tokens: dict[str, list[str]], depth: int, now_ms: int,
    counts: dict[str, int], size: int,
) -> list[tuple[int, float]]:
    present = [t for t in term_tokens if counts.get(t, 0) > 0]
    if not present:
        return []
    rows = _matches(conn, scope, key, [term_tokens[t] for t in present], now_ms, RECENT_WINDOW)
    docs = size if size < COMMON_DOCS else max(size, len(rows))
    return _bm25(rows, term_tokens, present, docs, counts)[:depth]


def keyword_candidates(
    conn: Conn, scope: Scope, term_tokens: dict[str, list[str]], depth: int, now_ms: int,
    measured: list[tuple[dict[str, int], int]],
) -> list[int]:
    if not term_tokens:
        return []
    per_key = [
        _scope_candidates(conn, scope, key, term_tokens, depth, now_ms, counts, size)
        for key, (counts, size) in zip(scope.visible_keys(), measured, strict=True)
    ]
    return [rowid for rowid, _ in heapq.merge(*per_key, key=lambda hit: hit[1])][:depth]


# -- people retriever ------------------------------------------------------------------------


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def people_ranking(conn: Conn, scope: Scope, focus: PeopleFocus | None, depth: int, now_ms: int) -> list[int]:
    if focus is None or not focus.ranked_people:
        return []
    where, params = predicate(scope, now_ms=now_ms)
    pool = [
        (int(rowid), _text(content, subjects))
        for rowid, content, subjects in conn.execute(
            f"SELECT m.rowid, m.content, m.subjects FROM memories AS m WHERE {where} AND m.rowid IN "
            "(SELECT memory_rowid FROM memory_people WHERE person_rowid = ANY(%s)) "
            "ORDER BY m.created_at_ms DESC, m.rowid DESC LIMIT %s",
            (*params, list(focus.ranked_people), RANK_POOL),
        )
    ]
    stems = sorted({_stem(term) for term in fts_query.extract_terms(focus.rest)}, key=len, reverse=True)
    if stems:
        words = re.compile(r"\b(" + "|".join(map(re.escape, stems)) + r")[a-z]{0,4}\b")

        def shared(text: str) -> int:
            plain = text.lower() if text.isascii() else " ".join(fts_query.extract_all_words(text))
            return len(set(words.findall(plain)))

        pool = sorted(pool, key=lambda row: -shared(row[1]))
    return [rowid for rowid, _ in pool[:depth]]


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


def knn(conn: Conn, scope: Scope, unit: npt.NDArray[np.float32], generation: int, k: int, now_ms: int) -> list[tuple[int, float]]:
    """(rowid, cosine) of the ``k`` nearest visible memories, best first: exact, one branch per key."""
    selects: list[str] = []
    bindings: list[object] = []
    for key in scope.visible_keys():
        where, params = predicate(scope, now_ms=now_ms, key=key)
        selects.append(
            "(SELECT v.rowid, v.embedding <=> %s AS distance FROM memory_vectors AS v JOIN memories AS m "
            "ON m.scope_key = v.scope_key AND m.rowid = v.rowid "
            f"WHERE v.scope_key = %s AND v.generation = %s AND {where} ORDER BY distance LIMIT %s)"
        )
        bindings += [unit, key, generation, *params, k]
    rows = conn.execute(
        f"SELECT rowid, distance FROM ({' UNION ALL '.join(selects)}) AS near ORDER BY distance, rowid DESC LIMIT %s",
        (*bindings, k),
    )
    return [(int(rowid), 1.0 - float(distance)) for rowid, distance in rows]


def cosines_for(conn: Conn, rowids: Sequence[int], unit: npt.NDArray[np.float32], generation: int) -> dict[int, float]:
    if not rowids:
        return {}
    rows = conn.execute(
        "SELECT rowid, embedding <=> %s FROM memory_vectors WHERE rowid = ANY(%s) AND generation = %s",
        (unit, list(rowids), generation),
    )
    return {int(rowid): 1.0 - float(distance) for rowid, distance in rows}


# -- neighbours ------------------------------------------------------------------------------


def around(conn: Conn, scope: Scope, rowids: Sequence[int], reach: int, now_ms: int) -> Neighbourhood:
    """The rows ``scope`` sees within ``reach`` positions of each of ``rowids`` in its scope key."""
    wanted = list(dict.fromkeys(rowids))
    hood = Neighbourhood(centres=set(wanted))
    if not wanted:
        return hood
    near_sql, near_params = predicate(scope, "s", now_ms=now_ms)
    centre_sql, centre_params = predicate(scope, "c", now_ms=now_ms)
    sql = (
        "SELECT c.rowid, n.rowid, n.content, n.subjects, n.created_at_ms FROM memories AS c CROSS JOIN LATERAL ("
        "(SELECT s.rowid, s.content, s.subjects, s.created_at_ms FROM memories AS s "
        f"WHERE s.scope_key = c.scope_key AND {near_sql} AND (s.created_at_ms, s.rowid) < (c.created_at_ms, c.rowid) "
        "ORDER BY s.created_at_ms DESC, s.rowid DESC LIMIT %s) UNION ALL "
        "(SELECT s.rowid, s.content, s.subjects, s.created_at_ms FROM memories AS s "
        f"WHERE s.scope_key = c.scope_key AND {near_sql} AND (s.created_at_ms, s.rowid) > (c.created_at_ms, c.rowid) "
        "ORDER BY s.created_at_ms, s.rowid LIMIT %s) UNION ALL "
        "SELECT c.rowid, c.content, c.subjects, c.created_at_ms) AS n "
        f"WHERE c.rowid = ANY(%s) AND {centre_sql}"
    )
    chains: dict[int, list[tuple[int, int]]] = {}
    params = (*near_params, reach, *near_params, reach, wanted, *centre_params)
    for centre, rowid, content, subjects, created in conn.execute(sql, params):
        rowid = int(rowid)
        if rowid not in hood.rows:
            hood.rows[rowid] = Row(rowid, _text(content, subjects), int(created))
        chains.setdefault(int(centre), []).append((int(created), rowid))
    for chain in chains.values():
        chain.sort()
        for (_, first), (_, second) in zip(chain, chain[1:]):
            hood.link(hood.rows[first], hood.rows[second])
    return hood


# -- the search ------------------------------------------------------------------------------


def _worth_a_cosine(
    adjacent: list[int], pool_features: npt.NDArray[np.float64], cosines: dict[int, float], table: ranking.FeatureTable, limit: int
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
) -> list[SearchHit]:
    if limit < 1:
        return []
    terms = fts_query.extract_terms(text)
    term_tokens = _term_tokens(terms)
    depth = candidate_depth(limit)
    measured = [measure(conn, key, term_tokens) for key in scope.visible_keys()] if term_tokens else []
    by_words = keyword_candidates(conn, scope, term_tokens, depth, now_ms, measured)
    by_people = people_ranking(conn, scope, focus, depth, now_ms)
    summed: dict[str, int] = {}
    for counts, _ in measured:
        for term, count in counts.items():
            summed[term] = summed.get(term, 0) + count
    weights = TermWeights(tokens.connection(), terms, summed, sum(size for _, size in measured))

    cosines: dict[int, float] = {}
    by_vector: list[int] = []
    semantic = unit is not None and generation is not None
    if semantic:
        assert unit is not None and generation is not None
        nearest = knn(conn, scope, unit, generation, coarse_k(depth), now_ms)
        by_vector = [rowid for rowid, _ in nearest[:depth]]
        cosines = dict(nearest)

    found = list(dict.fromkeys([*by_words, *by_vector, *by_people]))
    hood = around(conn, scope, found, REACH, now_ms)
    pool = [rowid for rowid in found if rowid in hood.rows]
    known = set(pool)
    adjacent = list(
        dict.fromkeys(n for rowid in pool for n in (hood.walk(rowid, -1), hood.walk(rowid, 1)) if n is not None and n not in known)
    )
    if semantic:
        assert unit is not None and generation is not None
        cosines.update(cosines_for(conn, [r for r in pool if r not in cosines], unit, generation))
    table = ranking.FeatureTable(hood, weights.coverage)
    features = table.matrix(pool, cosines)
    if semantic:
        assert unit is not None and generation is not None
        adjacent = _worth_a_cosine(adjacent, features, cosines, table, limit)
        cosines.update(cosines_for(conn, [r for r in adjacent if r not in cosines], unit, generation))
    joining = [rowid for rowid in adjacent if rowid in cosines or table.coverage(rowid) > 0]
    features = np.vstack([features, table.matrix(joining, cosines)])
    rowids = pool + joining
    created = {rowid: hood.rows[rowid].created_at_ms for rowid in rowids}

    scored = dict(zip(rowids, ranking.scores(features).tolist(), strict=True))
    ranked = ranking.order(scored, cosines, guard=ranking.guards(terms))
    if by_people:
        ranked = [(rowid, scored.get(rowid, 0.0)) for rowid in fuse([by_people, [r for r, _ in ranked]])]
    ranked = ranking.diversify(restrict(conn, focus, ranked), created)[:limit]
    records = fetch_visible(conn, scope, [rowid for rowid, _ in ranked], now_ms)
    annotate(conn, scope, records.values())
    hits: list[SearchHit] = []
    for rowid, score in ranked:
        found_record = records.get(rowid)
        if found_record is None:
            continue
        if rowid in cosines:
            similarity = min(1.0, max(0.0, cosines[rowid]))
        else:
            similarity = fts_query.term_fraction(terms, found_record.content, " ".join(found_record.subjects))
        hits.append(hit_from_record(found_record, score, similarity))
    return hits


def annotate(conn: Conn, scope: Scope, records: Any) -> None:
    """``about`` of each record: the caller's own people it is linked to (else its subjects)."""
    by_id = {record.id: record for record in records}
    if not by_id:
        return
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
