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

import contextlib
import heapq
import itertools
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import psycopg

from memoryd.store import ranking, relevance
from memoryd.store.fusion import fuse
from memoryd.store.neighbourhood import Neighbourhood, Row
from memoryd.store.people_records import PeopleFocus
from memoryd.store.postgres import tokens
from memoryd.store.postgres.memories import fetch_visible, hide_unseen_successors
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
    parts.append(
        "(SELECT count(*) FROM (SELECT 1 FROM memories WHERE scope_key = %s AND deleted_at_ms IS NULL LIMIT %s) AS s)"
    )
    params: list[object] = []
    for found in term_tokens.values():
        params += [key, found, COMMON_DOCS]
    params += [key, COMMON_DOCS]
    row = conn.execute("SELECT " + ", ".join(parts), params).fetchone() or ()
    values = [int(v) for v in row]
    return dict(zip(term_tokens, values[:-1], strict=True)), values[-1]


def _ranked(
    conn: Conn,
    scope: Scope,
    key: str,
    term_tokens: dict[str, list[str]],
    depth: int,
    now_ms: int,
    counts: dict[str, int],
    size: int,
    present: list[str],
) -> list[tuple[int, float]]:
    """The ``depth`` best visible matches of ``present`` in scope key ``key`` by FTS5's BM25
    formula, computed by the server from the stored term frequencies (lower is better, as
    FTS5's), over the scope's newest RECENT_WINDOW matches."""
    where, params = predicate(scope, now_ms=now_ms, key=key)
    # IDF with the scope standing for the table (the counts are capped at COMMON_DOCS: a common
    # term's IDF is ~0 either way).
    docs = max(size, *(counts[t] for t in present))
    idfs = [max(1e-6, math.log((docs - counts[t] + 0.5) / (counts[t] + 0.5))) for t in present]
    parts = " + ".join(
        "coalesce(%s * w.term_freqs[array_position(w.terms, %s)] * "
        f"{K1 + 1} / (w.term_freqs[array_position(w.terms, %s)] + {K1} * ({1 - B} + {B} * w.doc_len / a.avg_len)), 0)"
        for _ in present
    )
    part_params: list[object] = []
    for idf, term in zip(idfs, present, strict=True):
        first = term_tokens[term][0]
        part_params += [idf, first, first]
    alternatives = " OR ".join("m.terms @> %s" for _ in present)
    rows = conn.execute(
        "WITH w AS (SELECT m.rowid, m.terms, m.term_freqs, m.doc_len FROM memories AS m "
        f"WHERE {where} AND ({alternatives}) ORDER BY m.rowid DESC LIMIT %s), "
        "a AS (SELECT greatest(avg(doc_len), 1e-6) AS avg_len FROM w) "
        f"SELECT rowid, score FROM (SELECT w.rowid, ({parts}) AS score FROM w CROSS JOIN a) AS s "
        "WHERE score > 0 ORDER BY score DESC, rowid DESC LIMIT %s",
        (*params, *[term_tokens[t] for t in present], RECENT_WINDOW, *part_params, depth),
    ).fetchall()
    return [(int(rowid), -float(score)) for rowid, score in rows]


def _scope_candidates(
    conn: Conn,
    scope: Scope,
    key: str,
    term_tokens: dict[str, list[str]],
    depth: int,
    now_ms: int,
    counts: dict[str, int],
    size: int,
) -> list[tuple[int, float]]:
    """The SQLite backend's plan: with only rare terms (fewer than COMMON_DOCS matches each in
    the scope), every match is ranked; otherwise the rare terms rank alone (common terms have an
    IDF near zero, they barely move BM25), and only when they find fewer than ``depth`` do the
    newest matches of every term follow, after them."""
    present = [t for t in term_tokens if counts.get(t, 0) > 0]
    if not present:
        return []
    rare = [t for t in present if counts[t] < COMMON_DOCS]
    if len(rare) == len(present):
        return _ranked(conn, scope, key, term_tokens, depth, now_ms, counts, size, present)
    hits = _ranked(conn, scope, key, term_tokens, depth, now_ms, counts, size, rare) if rare else []
    if len(hits) >= depth:
        return hits
    recent = _ranked(conn, scope, key, term_tokens, depth + len(hits), now_ms, counts, size, present)
    seen = {rowid for rowid, _ in hits}
    floor = hits[-1][1] if hits else float("-inf")
    extra = [(rowid, max(score, floor)) for rowid, score in recent if rowid not in seen]
    return hits + extra[: depth - len(hits)]


def keyword_candidates(
    conn: Conn,
    scope: Scope,
    term_tokens: dict[str, list[str]],
    depth: int,
    now_ms: int,
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


#: A scope key with at least this many vectors is searched through the HNSW index of its
#: generation (iterative scans, so the scope filter never starves the result); smaller ones
#: exactly, through the primary key's range of the scope (recall 1.00, and faster there).
HNSW_FROM = 5000
#: The HNSW candidates a scan keeps (pgvector's ef_search; iterative scans go past it as needed).
EF_SEARCH = 100


def hnsw_index(generation: int) -> str:
    return f"memory_vectors_hnsw_{int(generation)}"


def _big(conn: Conn, key: str, generation: int) -> bool:
    (count,) = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM memory_vectors WHERE scope_key = %s AND generation = %s LIMIT %s) AS v",
        (key, generation, HNSW_FROM),
    ).fetchone() or (0,)
    return int(count) >= HNSW_FROM


def knn(
    conn: Conn, scope: Scope, unit: npt.NDArray[np.float32], generation: int, k: int, now_ms: int
) -> list[tuple[int, float]]:
    """(rowid, cosine) of the ``k`` nearest visible memories, best first: one branch per visible
    scope key, each with its own ORDER BY ... LIMIT (exact for small keys, HNSW for big ones)."""
    sql, bindings, approximate = _knn_statement(conn, scope, unit, generation, k, now_ms)
    with _index_scans(conn, approximate, k):
        rows = conn.execute(sql, bindings).fetchall()
    return [(int(rowid), 1.0 - float(distance)) for rowid, distance in rows]


def explain_knn(conn: Conn, scope: Scope, unit: npt.NDArray[np.float32], generation: int, k: int, now_ms: int) -> str:
    """The plan ``knn`` runs (tests check the big scopes' branch uses the HNSW index)."""
    sql, bindings, approximate = _knn_statement(conn, scope, unit, generation, k, now_ms)
    with _index_scans(conn, approximate, k):
        return "\n".join(str(row[0]) for row in conn.execute("EXPLAIN " + sql, bindings))


def _knn_statement(
    conn: Conn, scope: Scope, unit: npt.NDArray[np.float32], generation: int, k: int, now_ms: int
) -> tuple[str, tuple[object, ...], bool]:
    selects: list[str] = []
    bindings: list[object] = []
    approximate = False
    for key in scope.visible_keys():
        where, params = predicate(scope, now_ms=now_ms, key=key)
        distance = "v.embedding <=> %s"
        if _big(conn, key, generation):
            # The index's own expression (the vector cast to its length), so the planner can use it.
            distance = f"v.embedding::vector({unit.size}) <=> %s::vector({unit.size})"
            approximate = True
        selects.append(
            f"(SELECT v.rowid, {distance} AS distance FROM memory_vectors AS v JOIN memories AS m "
            "ON m.scope_key = v.scope_key AND m.rowid = v.rowid "
            f"WHERE v.scope_key = %s AND v.generation = {int(generation)} AND {where} ORDER BY distance LIMIT %s)"
        )
        bindings += [unit, key, *params, k]
    sql = f"SELECT rowid, distance FROM ({' UNION ALL '.join(selects)}) AS near ORDER BY distance, rowid DESC LIMIT %s"
    return sql, (*bindings, k), approximate


@contextlib.contextmanager
def _index_scans(conn: Conn, approximate: bool, k: int) -> Iterator[None]:
    """For a big scope's branch: iterative HNSW scans (the scope filter never starves the
    result; pgvector 0.8), and no sort of the scope's rows instead of the index (the planner
    underestimates the index's selectivity on a filtered scan); as before for the rest of the
    transaction."""
    if not approximate:
        yield
        return
    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    conn.execute(f"SET LOCAL hnsw.ef_search = {max(EF_SEARCH, min(k, 1000))}")
    conn.execute("SET LOCAL enable_sort = off")
    try:
        yield
    finally:
        conn.execute("SET LOCAL enable_sort = on")


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
        for (_, first), (_, second) in itertools.pairwise(chain):
            hood.link(hood.rows[first], hood.rows[second])
    return hood


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
) -> list[SearchHit]:
    """Hybrid search as the SQLite engine ranks it; each hit carries ``relevance``
    (store/relevance.py, from the same ranking features), hits below ``min_relevance`` left out."""
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
        dict.fromkeys(
            n for rowid in pool for n in (hood.walk(rowid, -1), hood.walk(rowid, 1)) if n is not None and n not in known
        )
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
        hits.append(hit_from_record(found_record, score, similarity, relevant.get(rowid, 0.0)))
    return hits


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
