"""The last statement of a search: its hits' records, each with the people it is about.

``fetch_visible`` (the final check of scope, deletion and expiry) and ``annotate``'s names in
one statement, sent with the search's last round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from memoryd.store.postgres.memories import RECORD_COLUMNS, record
from memoryd.store.postgres.visibility import predicate
from memoryd.store.records import MemoryRecord
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]

#: The caller's own people a memory is linked to, by the person's age (``annotate``'s names).
_ABOUT = (
    "ARRAY(SELECT p.name FROM memory_people AS mp JOIN people AS p ON p.rowid = mp.person_rowid "
    "AND p.scope_key = mp.scope_key WHERE mp.memory_rowid = m.rowid AND p.owner = %s ORDER BY p.rowid)"
)


def send(conn: Conn, scope: Scope, rowids: Sequence[int], now_ms: int) -> psycopg.Cursor[Any] | None:
    """``fetch_visible`` and ``annotate``'s names in one statement (``read`` reads it)."""
    if not rowids:
        return None
    where, params = predicate(scope, now_ms=now_ms)
    return conn.execute(
        f"SELECT {RECORD_COLUMNS}, {_ABOUT} FROM memories AS m WHERE m.rowid = ANY(%s) AND {where}",
        (scope.user_id, list(rowids), *params),
    )


def read(rows: Sequence[Sequence[Any]]) -> dict[int, MemoryRecord]:
    found: dict[int, MemoryRecord] = {}
    for row in rows:
        memory = record(row[:-1])
        if row[-1]:
            memory.about = list(row[-1])
        found[int(row[0])] = memory
    return found
