"""The people table on PostgreSQL: each owner's people (name, aliases, relationship) and their
memory links.

A person lives under its owner's personal scope key, and every decision that reads then writes
an owner's people takes that key's advisory lock (``lock_owner``), so two daemons learning from
two memories at once never create one person twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
import psycopg

from memoryd.store.people_records import PERSON_COLUMNS, StoredPerson, new_person, person_from_row
from memoryd.store.people_rules import fold_person
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres import notices
from memoryd.store.postgres.visibility import predicate
from memoryd.store.records import MemoryRecord
from memoryd.store.visibility import Scope, personal_key

Conn = psycopg.Connection[Any]
_encode = msgspec.json.encode


def lock_owner(conn: Conn, owner: str) -> None:
    """Serialize changes to one owner's people across daemons (until the transaction ends);
    the other daemons learn of the change when it commits (their people caches)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", (personal_key(owner),))


def announce(conn: Conn, owner: str) -> None:
    notices.send(conn, notices.CHANGES, f"people:{owner}")


def people_of(conn: Conn, owner: str) -> list[StoredPerson]:
    return [person_from_row(r) for r in _people_query(conn, owner)]


def _people_query(conn: Conn, owner: str) -> psycopg.Cursor[Any]:
    return conn.execute(
        f"SELECT {PERSON_COLUMNS} FROM people WHERE scope_key = %s ORDER BY rowid", (personal_key(owner),)
    )


def read_people(conn: Conn, owner: str) -> psycopg.Cursor[Any]:
    """``lock_owner``, then the owner's people: both sent, the rows read by ``learn`` (an add
    sends them with its first reads, in one round trip)."""
    lock_owner(conn, owner)
    return _people_query(conn, owner)


def _seen_through(scope: Scope, now_ms: int) -> tuple[str, tuple[object, ...]]:
    """SQL true for a row ``p`` of ``people`` that ``scope`` may know of: one of the memories it
    was learned from or linked to is one ``scope`` may see (expired and superseded ones count:
    they can still be read by id; deleted ones do not).  A person known only from memories the
    caller's chat may not see is as unknown to it as another user's.  A person none of whose
    memories is left is known only outside group chats and ``this_chat``: nothing says where
    it was learned, so no group sees it."""
    where, params = predicate(scope, now_ms=now_ms, include_expired=True, include_superseded=True)
    linked = "SELECT 1 FROM memory_people AS link JOIN memories AS m ON m.rowid = link.memory_rowid"
    seen = f"EXISTS ({linked} WHERE link.scope_key = p.scope_key AND link.person_rowid = p.rowid AND {where})"
    if scope.audience == "group" or scope.this_chat:
        return seen, params
    orphan = (
        f"NOT EXISTS ({linked} WHERE link.scope_key = p.scope_key AND link.person_rowid = p.rowid "
        "AND m.deleted_at_ms IS NULL)"
    )
    return f"({seen} OR {orphan})", params


def visible_people(conn: Conn, scope: Scope, now_ms: int) -> list[StoredPerson]:
    """The caller's people that ``scope`` may know of (:func:`_seen_through`), oldest first."""
    seen_sql, seen_params = _seen_through(scope, now_ms)
    found = conn.execute(
        f"SELECT {PERSON_COLUMNS} FROM people AS p WHERE p.scope_key = %s AND {seen_sql} ORDER BY p.rowid",
        (personal_key(scope.user_id), *seen_params),
    )
    return [person_from_row(r) for r in found]


def visible_rowids(conn: Conn, scope: Scope, person_rowids: Sequence[int], now_ms: int) -> set[int]:
    """Which of ``person_rowids`` (the caller's people) ``scope`` may know of."""
    if not person_rowids:
        return set()
    seen_sql, seen_params = _seen_through(scope, now_ms)
    found = conn.execute(
        f"SELECT p.rowid FROM people AS p WHERE p.scope_key = %s AND p.rowid = ANY(%s) AND {seen_sql}",
        (personal_key(scope.user_id), list(person_rowids), *seen_params),
    )
    return {int(rowid) for (rowid,) in found}


def insert(conn: Conn, person: StoredPerson) -> None:
    (rowid,) = conn.execute(
        "INSERT INTO people (scope_key, id, owner, name, aliases, relationship, created_at_ms, updated_at_ms) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING rowid",
        (personal_key(person.owner), person.id, person.owner, person.name, _encode(person.aliases).decode(),
         person.relationship, person.created_at_ms, person.updated_at_ms),
    ).fetchone() or (0,)  # fmt: skip
    person.rowid = int(rowid)


def create(
    conn: Conn, owner: str, name: str, now_ms: int, *, relationship: str | None = None, aliases: Sequence[str] = ()
) -> StoredPerson:
    person = new_person(owner, name, now_ms, relationship=relationship, aliases=aliases)
    insert(conn, person)
    return person


def save(conn: Conn, person: StoredPerson, now_ms: int) -> None:
    person.updated_at_ms = now_ms
    conn.execute(
        "UPDATE people SET name = %s, aliases = %s, relationship = %s, updated_at_ms = %s WHERE scope_key = %s AND rowid = %s",
        (
            person.name,
            _encode(person.aliases).decode(),
            person.relationship,
            now_ms,
            personal_key(person.owner),
            person.rowid,
        ),
    )


def link(conn: Conn, owner: str, person_rowids: Iterable[int], memory_rowid: int) -> None:
    for rowid in person_rowids:
        conn.execute(
            "INSERT INTO memory_people (scope_key, person_rowid, memory_rowid) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            (personal_key(owner), rowid, memory_rowid),
        )


def merge(conn: Conn, source: StoredPerson, target: StoredPerson, now_ms: int) -> StoredPerson:
    """Fold ``source`` into ``target`` (same owner): links, its name and aliases, its
    relationship when ``target`` has none; ``source`` is deleted."""
    key = personal_key(target.owner)
    conn.execute(
        "INSERT INTO memory_people (scope_key, person_rowid, memory_rowid) SELECT %s, %s, memory_rowid "
        "FROM memory_people WHERE scope_key = %s AND person_rowid = %s ON CONFLICT DO NOTHING",
        (key, target.rowid, key, source.rowid),
    )
    fold_person(source, target)
    delete(conn, source)
    save(conn, target, now_ms)
    return target


def delete(conn: Conn, person: StoredPerson) -> None:
    key = personal_key(person.owner)
    conn.execute("DELETE FROM memory_people WHERE scope_key = %s AND person_rowid = %s", (key, person.rowid))
    conn.execute("DELETE FROM people WHERE scope_key = %s AND rowid = %s", (key, person.rowid))


def memories_about(
    conn: Conn,
    scope: Scope,
    person_rowids: Sequence[int],
    now_ms: int,
    *,
    limit: int | None = None,
    include_expired: bool = False,
) -> list[tuple[int, MemoryRecord]]:
    if not person_rowids:
        return []
    where, params = predicate(scope, now_ms=now_ms, include_expired=include_expired)
    found = conn.execute(
        f"SELECT {rows.RECORD_COLUMNS} FROM memories AS m WHERE {where} AND m.rowid IN "
        "(SELECT memory_rowid FROM memory_people WHERE person_rowid = ANY(%s)) "
        "ORDER BY m.created_at_ms DESC, m.rowid DESC LIMIT %s",
        (*params, list(person_rowids), limit),
    )
    return [(int(row[0]), rows.record(row)) for row in found]


def counts_about(conn: Conn, scope: Scope, person_rowids: Sequence[int], now_ms: int) -> dict[int, int]:
    where, params = predicate(scope, now_ms=now_ms)
    found = conn.execute(
        f"SELECT link.person_rowid, count(*) FROM memory_people AS link JOIN memories AS m ON m.rowid = link.memory_rowid "
        f"WHERE link.person_rowid = ANY(%s) AND {where} GROUP BY link.person_rowid",
        (list(person_rowids), *params),
    )
    return {int(rowid): int(count) for rowid, count in found}
