"""A memory's conversation: the memories added just before and after it in the same scope.

Memories are rarely self-contained.  A reply is added right after the question it answers ("Did
they sign it for a reason?" then "They signed it to show our friendship"), so the question holds
the words of a search and its neighbour holds the answer.  The ranker reads a candidate's
neighbours to see that, and puts the neighbours of good candidates up for ranking too.

Neighbours are adjacent in creation order, (created_at_ms, rowid), within one scope key (ids
are random and say nothing of time; the (scope_key, created_at_ms, rowid) index serves the walk)
and only count as linked when they were added
within MAX_GAP_MS of each other: an exchange, not last week's note.  Deleted and expired
memories, and those the disclosure rules hide from the caller, are skipped (visibility.py's
predicate), so nothing the caller cannot see shapes the ranking.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable

import apsw

from memoryd.store.neighbourhood import Neighbourhood, Row
from memoryd.store.sqlite.visibility_sql import predicate
from memoryd.store.visibility import Scope


def _row(rowid: int, content: str, subjects: str, created_at_ms: int) -> Row:
    if not subjects or subjects == "[]":
        return Row(rowid, content, created_at_ms)
    return Row(rowid, " ".join([content, *json.loads(subjects)]), created_at_ms)


def _around_sql(scope: Scope, reach: int, now_ms: int) -> tuple[str, tuple[object, ...]]:
    # One statement for all candidates: each correlated subquery walks the (scope_key,
    # created_at_ms, rowid) index a few steps, which costs less than a round trip per candidate.
    # A neighbour shares its candidate's scope key and must pass the caller's own predicate
    # (disclosure rules included): what the caller cannot see never shapes its ranking.
    near_sql, near_params = predicate(scope, "s", now_ms=now_ms)
    # Each side is two index seeks, merged: the same instant by rowid, then strictly earlier
    # (later) instants.  A single row-value range, (created_at_ms, rowid) < (...), lets SQLite
    # seek only on created_at_ms and then filter every row of that instant: a bulk add of 10k
    # memories in one millisecond made each walk scan all 10k.
    step = (
        "SELECT * FROM (SELECT s.rowid AS r, s.created_at_ms AS t FROM memories AS s "
        f"WHERE s.scope_key = c.scope_key AND {near_sql} AND {{where}} ORDER BY {{order}} LIMIT ?)"
    )
    side = (
        "SELECT * FROM (SELECT r FROM ("
        + step.format(where="s.created_at_ms = c.created_at_ms AND s.rowid {cmp} c.rowid", order="s.rowid {dir}")
        + " UNION ALL "
        + step.format(where="s.created_at_ms {cmp} c.created_at_ms", order="s.created_at_ms {dir}, s.rowid {dir}")
        + ") ORDER BY t {dir}, r {dir} LIMIT ?)"
    )
    before = side.format(cmp="<", dir="DESC")
    after = side.format(cmp=">", dir="ASC")
    visible, visible_params = predicate(scope, "c", now_ms=now_ms)
    sql = (
        "SELECT c.rowid, n.rowid, n.content, n.subjects, n.created_at_ms "
        "FROM json_each(?) AS w CROSS JOIN memories AS c ON c.rowid = w.value "
        f"JOIN memories AS n ON n.rowid IN ({before} UNION ALL {after} UNION ALL SELECT c.rowid) "
        f"WHERE {visible}"
    )
    one_side = (*near_params, reach, *near_params, reach, reach)
    return sql, (*one_side, *one_side, *visible_params)


def around(db: apsw.Connection, scope: Scope, rowids: Iterable[int], reach: int, now_ms: int) -> Neighbourhood:
    """The rows ``scope`` sees within ``reach`` positions of each of ``rowids``."""
    wanted = list(dict.fromkeys(rowids))
    hood = Neighbourhood(centres=set(wanted))
    if not wanted:
        return hood
    sql, params = _around_sql(scope, reach, now_ms)
    chains: dict[int, list[tuple[int, int]]] = {}
    for centre, rowid, content, subjects, created in db.execute(sql, (json.dumps(wanted), *params)):
        if rowid not in hood.rows:
            hood.rows[rowid] = _row(rowid, content, subjects, created)
        chains.setdefault(centre, []).append((created, rowid))
    for chain in chains.values():
        chain.sort()
        for (_, first), (_, second) in itertools.pairwise(chain):
            hood.link(hood.rows[first], hood.rows[second])
    return hood
