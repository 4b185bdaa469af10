"""The people retriever on PostgreSQL: a search's third ranked list, beside BM25 and vectors.

The memories of the people a query mentions (a ``PeopleFocus``), newest first, those sharing
the most of the question's other words first; the ``about`` filter; and each record's ``about``
(the caller's own people it is linked to), as the SQLite engine's ``people_retriever.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from memoryd.store import query_terms, search_rules
from memoryd.store.people_records import PeopleFocus
from memoryd.store.postgres.memories import hide_unseen_successors
from memoryd.store.postgres.search.keyword import Statement
from memoryd.store.postgres.search.neighbours import text
from memoryd.store.postgres.visibility import predicate
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]

#: The newest memories of the mentioned people that the people retriever ranks.
RANK_POOL = 200


def people_statement(scope: Scope, focus: PeopleFocus, now_ms: int) -> Statement:
    """The newest RANK_POOL visible memories linked to the focus's people."""
    where, params = predicate(scope, now_ms=now_ms)
    return (
        f"SELECT m.rowid, m.content, m.subjects FROM memories AS m WHERE {where} AND m.rowid IN "
        "(SELECT memory_rowid FROM memory_people WHERE person_rowid = ANY(%s)) "
        "ORDER BY m.created_at_ms DESC, m.rowid DESC LIMIT %s",
        (*params, list(focus.ranked_people), RANK_POOL),
    )


def people_order(rows: Sequence[Sequence[Any]], focus: PeopleFocus, depth: int) -> list[int]:
    """The pool, those sharing the most of the question's other words first."""
    pool = [(int(rowid), text(content, subjects)) for rowid, content, subjects in rows]
    pool = query_terms.by_shared_words(pool, focus.rest)
    return [rowid for rowid, _ in pool[:depth]]


def people_ranking(conn: Conn, scope: Scope, focus: PeopleFocus | None, depth: int, now_ms: int) -> list[int]:
    if focus is None or not focus.ranked_people:
        return []
    return people_order(conn.execute(*people_statement(scope, focus, now_ms)).fetchall(), focus, depth)


def restrict(conn: Conn, focus: PeopleFocus | None, fused: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """With an ``about`` filter, keep only the fused rowids linked to those people."""

    def linked(people: list[int], rowids: list[int]) -> list[int]:
        return [
            int(rowid)
            for (rowid,) in conn.execute(
                "SELECT DISTINCT memory_rowid FROM memory_people WHERE person_rowid = ANY(%s) AND memory_rowid = ANY(%s)",
                (people, rowids),
            )
        ]

    return search_rules.restrict(focus, fused, linked)


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
