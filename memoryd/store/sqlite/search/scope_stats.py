"""Document counts within a scope key (the keyword plan's and the ranker's IDF), cached per
connection until the file changes.

Every search needs, per visible scope key, how many documents hold each query term and how many
the key holds, both capped at ``COMMON_DOCS``.  Each count is an FTS5 query that intersects the
scope token's doclist with the term's, and the same words come back query after query.  The
counts are kept per connection and dropped as soon as the snapshot the connection reads is not
the one they were measured in: ``PRAGMA data_version`` changes when any other connection (or
process) commits, ``total_changes()`` when this one writes.  Read inside a transaction, both
describe that transaction's snapshot, so a cached count is never from another snapshot.
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import dataclass, field

import apsw

from memoryd.store.sqlite.search import fts_query

#: A term matching at least this many of the scope's documents counts as common.
COMMON_DOCS = 1000
#: Counts kept per connection before the cache starts over (a few hundred bytes each).
MAX_ENTRIES = 20_000


#: Memories looked at to estimate a scope key's share of the table.
SHARE_SAMPLE = 256


@dataclass
class _Counts:
    snapshot: tuple[int, int]
    terms: dict[tuple[str, str], int] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    shares: dict[str, float] = field(default_factory=dict)


_by_connection: weakref.WeakKeyDictionary[apsw.Connection, _Counts] = weakref.WeakKeyDictionary()
_lock = threading.Lock()  # the dictionary is shared; each connection is used by one thread at a time


def _counts(db: apsw.Connection) -> _Counts:
    (version,) = db.execute("PRAGMA data_version").fetchone() or (0,)
    snapshot = (int(version), db.total_changes())
    with _lock:
        counts = _by_connection.get(db)
        if counts is None or counts.snapshot != snapshot or len(counts.terms) > MAX_ENTRIES:
            counts = _by_connection[db] = _Counts(snapshot)
    return counts


def _capped(expression: str) -> str:
    return f"(SELECT count(*) FROM (SELECT rowid FROM memories_fts WHERE memories_fts MATCH {expression} LIMIT ?))"


def measure(db: apsw.Connection, key: str, terms: list[str]) -> tuple[dict[str, int], int]:
    """(each term's document count in scope key ``key``, the key's document count), capped
    at COMMON_DOCS; what the cache lacks is counted in one statement."""
    counts = _counts(db)
    missing = [term for term in terms if (key, term) not in counts.terms]
    size_missing = key not in counts.sizes
    if missing or size_missing:
        token = [fts_query.scope_token(key)]
        expressions = [fts_query.match_expression(token, [term]) for term in missing]
        if size_missing:
            expressions.append(fts_query.scope_filter(token))
        sql = "SELECT " + ", ".join(_capped("?") for _ in expressions)
        bindings = [value for expression in expressions for value in (expression, COMMON_DOCS)]
        found = [int(value) for value in db.execute(sql, bindings).fetchone() or ()]
        if size_missing:
            counts.sizes[key] = found.pop()
        counts.terms.update(((key, term), count) for term, count in zip(missing, found, strict=True))
    return {term: counts.terms[(key, term)] for term in terms}, counts.sizes[key]


def share(db: apsw.Connection, key: str) -> float:
    """About what share (0..1) of the table's live memories scope key ``key`` holds: a plan
    choice of the keyword retriever (never a filter), from memories at evenly spaced rowids."""
    counts = _counts(db)
    if key not in counts.shares:
        (top,) = db.execute("SELECT coalesce(max(rowid), 0) FROM memories").fetchone() or (0,)
        step = max(1, int(top) // SHARE_SAMPLE)
        live, mine = db.execute(
            "SELECT count(*), total(m.scope_key = ?) FROM json_each(?) AS s "
            "CROSS JOIN memories AS m ON m.rowid = s.value WHERE m.deleted_at_ms IS NULL",
            (key, json.dumps(list(range(1, int(top) + 1, step)))),
        ).fetchone() or (0, 0.0)
        counts.shares[key] = float(mine) / int(live) if live else 0.0
    return counts.shares[key]


def live_count(db: apsw.Connection, partition: str, cap: int) -> int:
    """The scope's live memories, counted up to ``cap``."""
    (found,) = db.execute(
        "SELECT count(*) FROM (SELECT 1 FROM memories WHERE scope_key = ? AND deleted_at_ms IS NULL LIMIT ?)",
        (partition, cap),
    ).fetchone()
    return int(found)
