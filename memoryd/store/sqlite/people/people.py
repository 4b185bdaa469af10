"""The people table: each owner's people (name, aliases, relationship) and their memory links.

A person belongs to one owner (``people.owner``) and every function here takes that owner, so
one user's people never reach another.  A link (``memory_people``) is only a pointer: the
memories behind it are read through ``visibility.predicate`` like every other memory.
Functions take a connection already inside a transaction (see ``db.Database``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apsw
import msgspec

from memoryd.store.people_records import PERSON_COLUMNS, StoredPerson, new_person, person_from_row
from memoryd.store.people_rules import fold_person
from memoryd.store.records import RECORD_COLUMNS, MemoryRecord, record_from_row
from memoryd.store.sqlite.memories import memories
from memoryd.store.sqlite.visibility_sql import predicate
from memoryd.store.visibility import Scope

_encode = msgspec.json.encode

#: The memories linked to the people whose rowids are bound as a JSON list.  CROSS JOIN pins
#: the plan to "the people's links, then each memory by rowid"; left alone, the planner walks
#: the whole scope in id order (20 ms in a 100k scope).
_LINKED_MEMORIES = (
    "json_each(?) AS wanted CROSS JOIN memory_people AS link ON link.person_rowid = wanted.value "
    "CROSS JOIN memories ON memories.rowid = link.memory_rowid"
)


def people_of(db: apsw.Connection, owner: str) -> list[StoredPerson]:
    """The owner's people, oldest first (a stable order for resolution ties)."""
    rows = db.execute(f"SELECT {PERSON_COLUMNS} FROM people WHERE owner = ? ORDER BY rowid", (owner,))
    return [person_from_row(row) for row in rows]


def _seen_through(scope: Scope, now_ms: int) -> tuple[str, tuple[object, ...]]:
    """SQL true for a row of ``people`` that ``scope`` may know of: one of the memories it was
    learned from or linked to is one ``scope`` may see (expired and superseded ones count: they
    can still be read by id; deleted ones do not).  A person known only from memories the
    caller's chat may not see (a private chat's, a sensitive one in a group) is as unknown to it
    as another user's: its name, aliases and relationship came from those memories.

    A person none of whose memories is left (forget_person keeping the person, an imported
    person) is known only outside group chats and ``this_chat``: nothing says where it was
    learned, so no group sees it."""
    where, params = predicate(scope, now_ms=now_ms, include_expired=True, include_superseded=True)
    linked = "SELECT 1 FROM memory_people AS link CROSS JOIN memories ON memories.rowid = link.memory_rowid"
    seen = f"EXISTS ({linked} WHERE link.person_rowid = people.rowid AND {where})"
    if scope.audience == "group" or scope.this_chat:
        return seen, params
    orphan = f"NOT EXISTS ({linked} WHERE link.person_rowid = people.rowid AND memories.deleted_at_ms IS NULL)"
    return f"({seen} OR {orphan})", params


def visible_people(db: apsw.Connection, scope: Scope, now_ms: int) -> list[StoredPerson]:
    """The caller's people that ``scope`` may know of (:func:`_seen_through`), oldest first."""
    seen_sql, seen_params = _seen_through(scope, now_ms)
    rows = db.execute(
        f"SELECT {PERSON_COLUMNS} FROM people WHERE owner = ? AND {seen_sql} ORDER BY rowid",
        (scope.user_id, *seen_params),
    )
    return [person_from_row(row) for row in rows]


def visible_rowids(db: apsw.Connection, scope: Scope, person_rowids: Sequence[int], now_ms: int) -> set[int]:
    """Which of ``person_rowids`` (the caller's people) ``scope`` may know of."""
    if not person_rowids:
        return set()
    seen_sql, seen_params = _seen_through(scope, now_ms)
    rows = db.execute(
        f"SELECT people.rowid FROM json_each(?) AS wanted CROSS JOIN people ON people.rowid = wanted.value "
        f"WHERE people.owner = ? AND {seen_sql}",
        (_encode(list(person_rowids)).decode(), scope.user_id, *seen_params),
    )
    return {int(rowid) for (rowid,) in rows}


def by_id(db: apsw.Connection, owner: str, person_id: str) -> StoredPerson | None:
    row = db.execute(f"SELECT {PERSON_COLUMNS} FROM people WHERE owner = ? AND id = ?", (owner, person_id)).fetchone()
    return None if row is None else person_from_row(row)


def create(
    db: apsw.Connection,
    owner: str,
    name: str,
    now_ms: int,
    *,
    relationship: str | None = None,
    aliases: Sequence[str] = (),
) -> StoredPerson:
    person = new_person(owner, name, now_ms, relationship=relationship, aliases=aliases)
    insert(db, person)
    return person


def insert(db: apsw.Connection, person: StoredPerson) -> None:
    """Store ``person`` as it is (``create`` makes a new one; an import keeps its id and times),
    and give it its rowid."""
    db.execute(
        "INSERT INTO people (id, owner, name, aliases, relationship, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (person.id, person.owner, person.name, _encode(person.aliases).decode(), person.relationship,
         person.created_at_ms, person.updated_at_ms),
    )  # fmt: skip
    person.rowid = db.last_insert_rowid()


def save(db: apsw.Connection, person: StoredPerson, now_ms: int) -> None:
    """Write back name, aliases and relationship of a person read with this owner."""
    person.updated_at_ms = now_ms
    db.execute(
        "UPDATE people SET name = ?, aliases = ?, relationship = ?, updated_at_ms = ? WHERE rowid = ? AND owner = ?",
        (person.name, _encode(person.aliases).decode(), person.relationship, now_ms, person.rowid, person.owner),
    )


def link(db: apsw.Connection, person_rowids: Iterable[int], memory_rowid: int) -> None:
    db.executemany(
        "INSERT OR IGNORE INTO memory_people (person_rowid, memory_rowid) VALUES (?, ?)",
        [(rowid, memory_rowid) for rowid in person_rowids],
    )


def merge(db: apsw.Connection, source: StoredPerson, target: StoredPerson, now_ms: int) -> StoredPerson:
    """Fold ``source`` into ``target`` (same owner): links, its name and aliases, its
    relationship when ``target`` has none; ``source`` is deleted."""
    db.execute(
        "INSERT OR IGNORE INTO memory_people (person_rowid, memory_rowid) "
        "SELECT ?, memory_rowid FROM memory_people WHERE person_rowid = ?",
        (target.rowid, source.rowid),
    )
    fold_person(source, target)
    delete(db, source)
    save(db, target, now_ms)
    return target


def delete(db: apsw.Connection, person: StoredPerson) -> None:
    """Remove the person; its links go with it (ON DELETE CASCADE)."""
    db.execute("DELETE FROM people WHERE rowid = ? AND owner = ?", (person.rowid, person.owner))


def memories_about(
    db: apsw.Connection,
    scope: Scope,
    person_rowids: Sequence[int],
    now_ms: int,
    *,
    limit: int = -1,
    offset: int = 0,
    before_id: str | None = None,
    include_expired: bool = False,
) -> list[tuple[int, MemoryRecord]]:
    """(rowid, record) of the memories linked to these people that ``scope`` may see, newest first."""
    if not person_rowids:
        return []
    where, params = predicate(scope, now_ms=now_ms, include_expired=include_expired)
    if before_id is not None:
        # Ids carry no time (ids.py): the cursor is the named memory's place in the list order.
        after = memories.position_of(db, scope, before_id, now_ms)
        where, params = f"{where} AND (memories.created_at_ms, memories.rowid) < (?, ?)", (*params, *after)
    rows = db.execute(
        f"SELECT DISTINCT {RECORD_COLUMNS} FROM {_LINKED_MEMORIES} "
        f"WHERE {where} ORDER BY memories.created_at_ms DESC, memories.rowid DESC LIMIT ? OFFSET ?",
        (_encode(list(person_rowids)).decode(), *params, limit, offset),
    )
    return [(int(row[0]), record_from_row(row)) for row in rows]


def texts_about(
    db: apsw.Connection, scope: Scope, person_rowids: Sequence[int], now_ms: int, *, limit: int
) -> list[tuple[int, str]]:
    """(rowid, content + subjects) of the newest ``limit`` memories about these people that
    ``scope`` may see: what the people retriever ranks (no record decoding on the search path)."""
    where, params = predicate(scope, now_ms=now_ms)
    # Rowids grow with time, so the link index gives newest first without a sort.
    rows = db.execute(
        f"SELECT memories.rowid, memories.content || ' ' || memories.subjects FROM {_LINKED_MEMORIES} "
        f"WHERE {where} ORDER BY link.memory_rowid DESC LIMIT ?",
        (_encode(list(person_rowids)).decode(), *params, limit * len(person_rowids)),
    )
    found = dict((int(rowid), text) for rowid, text in rows)  # one row per memory
    return list(found.items())[:limit]


def counts_about(db: apsw.Connection, scope: Scope, person_rowids: Sequence[int], now_ms: int) -> dict[int, int]:
    """person rowid -> how many memories about them ``scope`` may see (absent: none)."""
    where, params = predicate(scope, now_ms=now_ms)
    rows = db.execute(
        f"SELECT link.person_rowid, count(*) FROM {_LINKED_MEMORIES} WHERE {where} GROUP BY link.person_rowid",
        (_encode(list(person_rowids)).decode(), *params),
    )
    return {int(rowid): int(count) for rowid, count in rows}


def names_for(db: apsw.Connection, owner: str, memory_ids: Sequence[str]) -> dict[str, list[str]]:
    """memory id -> the names of ``owner``'s people it is linked to (another owner's people
    linked to the same group memory are never named)."""
    if not memory_ids:
        return {}
    rows = db.execute(
        "SELECT memories.id, people.name FROM json_each(?) AS wanted "
        "CROSS JOIN memories ON memories.id = wanted.value "
        "JOIN memory_people AS link ON link.memory_rowid = memories.rowid "
        "JOIN people ON people.rowid = link.person_rowid "
        "WHERE people.owner = ? ORDER BY people.rowid",
        (_encode(list(memory_ids)).decode(), owner),
    )
    names: dict[str, list[str]] = {}
    for memory_id, name in rows:
        names.setdefault(memory_id, []).append(name)
    return names


def delete_memories_about(
    db: apsw.Connection, scope: Scope, person: StoredPerson, now_ms: int, reason: str
) -> list[str]:
    """Soft-delete every memory about ``person`` that ``scope`` may see (expired ones too);
    each deletion is audited.  Memories the caller cannot see are left alone."""
    found = memories_about(db, scope, [person.rowid], now_ms, include_expired=True)
    for rowid, record in found:
        memories.mark_deleted(db, rowid, now_ms)
        memories.audit(
            db,
            record.id,
            "deleted",
            scope.user_id,
            now_ms,
            {"chat_id": scope.chat_id, "reason": reason, "person_id": person.id},
        )
    return [record.id for _, record in found]
