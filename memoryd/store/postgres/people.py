"""People on PostgreSQL: each owner's people and their links to memories (``interfaces.PeopleStore``).

The rules (relationship statements, subjects, mentions, merge targets) are the shared ones of
``memoryd.knowledge``; this module only stores.  A person lives under its owner's personal
scope key, and every decision that reads then writes an owner's people takes that key's
advisory lock, so two daemons learning from two memories at once never create one person twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import psycopg

from memoryd.errors import PeopleLimitReached
from memoryd.ids import is_id_prefix, new_ulid
from memoryd.knowledge import (
    KnownPerson,
    MentionFinder,
    merge_target,
    normalise_name,
    parse_relationships,
    resolve_person,
)
from memoryd.knowledge.people import RelationshipFact, is_relationship_phrase, new_subjects
from memoryd.store.erasure_log import ErasureLog
from memoryd.store.people_records import (
    AliasTaken,
    Forgotten,
    Merge,
    StoredPerson,
    SummaryMaterial,
)
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres import notices
from memoryd.store.postgres.db import Database
from memoryd.store.postgres.search import annotate
from memoryd.store.postgres.visibility import predicate
from memoryd.store.records import MemoryRecord
from memoryd.store.visibility import Scope, covers, personal_key

Conn = psycopg.Connection[Any]
_encode = msgspec.json.encode
_decode = msgspec.json.decode
_COLUMNS = "rowid, id, owner, name, aliases, relationship, created_at_ms, updated_at_ms"
#: How many hidden people a match may pick before the phrase counts as naming nobody.
_MAX_HIDDEN_PICKS = 4
_SELF_WORDS = frozenset({"i", "me", "myself", "user", "the user", "self", "owner"})


def _person(row: Sequence[Any]) -> StoredPerson:
    rowid, id_, owner, name, aliases, relationship, created, updated = row
    return StoredPerson(int(rowid), id_, owner, name, list(_decode(aliases)), relationship, int(created), int(updated))


def lock_owner(conn: Conn, owner: str) -> None:
    """Serialize changes to one owner's people across daemons (until the transaction ends);
    the other daemons learn of the change when it commits (their people caches)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", (personal_key(owner),))


def announce(conn: Conn, owner: str) -> None:
    notices.send(conn, notices.CHANGES, f"people:{owner}")


def people_of(conn: Conn, owner: str) -> list[StoredPerson]:
    return [_person(r) for r in _people_query(conn, owner)]


def _people_query(conn: Conn, owner: str) -> psycopg.Cursor[Any]:
    return conn.execute(f"SELECT {_COLUMNS} FROM people WHERE scope_key = %s ORDER BY rowid", (personal_key(owner),))


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
        f"SELECT {_COLUMNS} FROM people AS p WHERE p.scope_key = %s AND {seen_sql} ORDER BY p.rowid",
        (personal_key(scope.user_id), *seen_params),
    )
    return [_person(r) for r in found]


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
    person = StoredPerson(0, new_ulid(now_ms), owner, " ".join(name.split()), [], relationship, now_ms, now_ms)
    for alias in aliases:
        person.add_alias(alias)
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


def delete(conn: Conn, person: StoredPerson) -> None:
    key = personal_key(person.owner)
    conn.execute("DELETE FROM memory_people WHERE scope_key = %s AND person_rowid = %s", (key, person.rowid))
    conn.execute("DELETE FROM people WHERE scope_key = %s AND rowid = %s", (key, person.rowid))


@dataclass(frozen=True)
class Learned:
    linked: list[str]
    changed: bool
    people: int = 0  # the owner's people afterwards


def learn(
    conn: Conn,
    *,
    owner: str,
    memory_rowid: int,
    content: str,
    subjects: Sequence[str],
    owner_names: Sequence[str],
    now_ms: int,
    max_people: int | None = None,
    strict: bool = False,
    seen_by: Scope | None = None,
    people: psycopg.Cursor[Any] | None = None,
) -> Learned:
    """What a memory teaches about the owner's people (the SQLite backend's rules, in order:
    relationship statements, subjects, mentions of known people).  ``seen_by``: the adder; the
    memory is matched only against the people it may know of, so "my wife" said in a group chat
    never links to, and so never reveals, a wife known only from a private chat.

    ``max_people``: the owner never has more people than this; a person the content names past
    it is not created, and with ``strict`` (memory.add: the caller chose the subjects) a subject
    that would create one raises PeopleLimitReached (the caller's transaction then rolls back).

    ``people``: ``read_people(conn, owner)`` sent earlier in this transaction (else it is now)."""
    known = [_person(r) for r in (people or read_people(conn, owner))]
    by_id = {person.id: person for person in known}
    seen: dict[int, bool] = {}

    def knowable(key: str) -> bool:
        person = by_id[key]
        if seen_by is None:
            return True
        if person.rowid not in seen:
            seen[person.rowid] = person.rowid in visible_rowids(conn, seen_by, [person.rowid], now_ms)
        return seen[person.rowid]

    def first_knowable(pick: Callable[[list[KnownPerson]], KnownPerson | None]) -> KnownPerson | None:
        # Another person may answer the same phrase when the first one picked is hidden.
        candidates = [p.known() for p in known]
        for _ in range(_MAX_HIDDEN_PICKS):
            found = pick(candidates)
            if found is None or knowable(found.key):
                return found
            candidates = [c for c in candidates if c.key != found.key]
        return None

    def created_here(person: StoredPerson) -> StoredPerson:
        known.append(person)
        by_id[person.id] = person
        seen[person.rowid] = True
        return person

    own = {normalise_name(name) for name in owner_names if name} | _SELF_WORDS

    def room() -> bool:
        return max_people is None or len(known) < max_people

    if strict and max_people is not None:
        # Refused before anything changes.
        fresh = new_subjects(lambda phrase: resolve_person(phrase, [p.known() for p in known]), own, subjects)
        if len(known) + len(fresh) > max_people:
            raise PeopleLimitReached(f"subjects[{fresh[max(max_people - len(known), 0)]}]", max_people)
    about: dict[int, StoredPerson] = {}
    dirty: set[int] = set()
    created = False
    for fact in parse_relationships(content):
        if normalise_name(fact.name) in own:
            continue
        target = first_knowable(functools.partial(merge_target, fact))
        if target is not None and seen_by is not None and not _may_tell(conn, by_id[target.key], fact, memory_rowid):
            target = None  # a person of its own: what this memory says stays where it may be seen
        if target is None:
            if not room():
                continue
            person = created_here(
                create(conn, owner, fact.name, now_ms, relationship=fact.relationship, aliases=fact.aliases)
            )
            created = True
        else:
            person = by_id[target.key]
            changed = person.add_alias(fact.name)
            for alias in fact.aliases:
                changed = person.add_alias(alias) or changed
            if person.relationship is None:
                person.relationship, changed = fact.relationship, True
            if changed:
                dirty.add(person.rowid)
        about[person.rowid] = person
    for position, subject in enumerate(subjects):
        wanted = normalise_name(subject)
        if not wanted or wanted in own:
            continue
        found = first_knowable(functools.partial(resolve_person, subject))
        if found is not None:
            about.setdefault(by_id[found.key].rowid, by_id[found.key])
        elif not is_relationship_phrase(subject):
            if not room():
                if strict:
                    raise PeopleLimitReached(f"subjects[{position}]", max_people or 0)
                continue
            person = created_here(create(conn, owner, subject, now_ms))
            about[person.rowid] = person
            created = True
    if known:
        for mention in MentionFinder([p.known() for p in known]).find(content):
            if mention.person is not None and knowable(mention.person.key):
                person = by_id[mention.person.key]
                about.setdefault(person.rowid, person)
    for person in known:
        if person.rowid in dirty:
            save(conn, person, now_ms)
    link(conn, owner, about, memory_rowid)
    if created or dirty:
        announce(conn, owner)
    return Learned([p.name for p in about.values()], created or bool(dirty), len(known))


def _may_tell(conn: Conn, person: StoredPerson, fact: RelationshipFact, memory_rowid: int) -> bool:
    """Whether the memory may add ``fact``'s name, aliases or relationship to ``person``: it
    tells nothing new, or everyone who knows the person (through a memory linked to it) may
    also see this memory."""
    names = {normalise_name(name) for name in (person.name, *person.aliases)}
    news = normalise_name(fact.name) not in names or any(normalise_name(a) not in names for a in fact.aliases)
    if not news and person.relationship is not None:
        return True
    here = conn.execute(
        "SELECT scope_key, chat_id, disclosure FROM memories WHERE rowid = %s", (memory_rowid,)
    ).fetchone()
    linked = conn.execute(
        "SELECT DISTINCT m.scope_key, m.chat_id, m.disclosure FROM memory_people AS link "
        "JOIN memories AS m ON m.rowid = link.memory_rowid "
        "WHERE link.scope_key = %s AND link.person_rowid = %s AND m.deleted_at_ms IS NULL AND m.rowid != %s",
        (personal_key(person.owner), person.rowid, memory_rowid),
    ).fetchall()
    return here is not None and all(covers(tuple(here), tuple(other)) for other in linked)


def find(conn: Conn, scope: Scope, phrase: str, now_ms: int) -> StoredPerson | None:
    """The caller's person ``phrase`` names among those ``scope`` may know of."""
    known = visible_people(conn, scope, now_ms)
    wanted = phrase.strip()
    if is_id_prefix(wanted.upper()):
        for person in known:
            if person.id == wanted.upper():
                return person
    found = resolve_person(wanted, [p.known() for p in known])
    return None if found is None else next(p for p in known if p.id == found.key)


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


class People:
    """``interfaces.PeopleStore`` on PostgreSQL."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._db: Database = store.db
        self._clock = store.clock

    async def learn(
        self,
        owner: str,
        memory_id: str,
        content: str,
        subjects: Sequence[str],
        owner_names: Sequence[str],
        *,
        max_people: int | None = None,
        seen_by: Scope | None = None,
    ) -> Learned:
        now = self._clock()

        def run(conn: Conn) -> Learned:
            row = conn.execute("SELECT rowid FROM memories WHERE id = %s", (memory_id,)).fetchone()
            if row is None:
                return Learned([], False)
            return learn(
                conn,
                owner=owner,
                memory_rowid=int(row[0]),
                content=content,
                subjects=subjects,
                owner_names=owner_names,
                now_ms=now,
                max_people=max_people,
                seen_by=seen_by,
            )

        return await self._db.run(run)

    def learn_many(
        self, owner: str, memories_of: Sequence[tuple[str, str, Sequence[str]]], owner_names: Sequence[str]
    ) -> int:
        now = self._clock()

        def run(conn: Conn) -> int:
            ids = dict(
                conn.execute(
                    "SELECT id, rowid FROM memories WHERE id = ANY(%s)", ([m[0] for m in memories_of],)
                ).fetchall()
            )
            for memory_id, content, subjects in memories_of:
                learn(
                    conn,
                    owner=owner,
                    memory_rowid=int(ids[memory_id]),
                    content=content,
                    subjects=subjects,
                    owner_names=owner_names,
                    now_ms=now,
                )
            return len(memories_of)

        return self._db.run_sync(run)

    async def people_of(self, owner: str) -> list[StoredPerson]:
        return await self._db.run(people_of, owner)

    async def erasure_mark(self) -> ErasureLog | None:
        """None: an erasure tells every daemon itself (``erased:<user>`` on memoryd_changes)."""
        return None

    async def visible_people(self, scope: Scope) -> list[StoredPerson]:
        return await self._db.run(visible_people, scope, self._clock())

    async def visible_rowids(self, scope: Scope, person_rowids: Sequence[int]) -> set[int]:
        return await self._db.run(visible_rowids, scope, list(person_rowids), self._clock())

    async def find(self, scope: Scope, phrase: str) -> StoredPerson | None:
        return await self._db.run(find, scope, phrase, self._clock())

    async def memories_about(self, scope: Scope, person: StoredPerson, *, limit: int) -> list[MemoryRecord]:
        def run(conn: Conn) -> list[MemoryRecord]:
            found = [record for _, record in memories_about(conn, scope, [person.rowid], self._clock(), limit=limit)]
            annotate(conn, scope, found)
            return found

        return await self._db.run(run)

    async def counts(self, scope: Scope, persons: Sequence[StoredPerson]) -> dict[str, int]:
        def run(conn: Conn) -> dict[str, int]:
            found = counts_about(conn, scope, [p.rowid for p in persons], self._clock())
            return {p.id: found.get(p.rowid, 0) for p in persons}

        return await self._db.run(run)

    async def merge(self, scope: Scope, source: str, target: str) -> Merge:
        now = self._clock()
        owner = scope.user_id

        def run(conn: Conn) -> Merge:
            lock_owner(conn, owner)
            a, b = find(conn, scope, source, now), find(conn, scope, target, now)
            if a is None or b is None or a.id == b.id:
                return Merge(a, b, None)
            key = personal_key(owner)
            conn.execute(
                "INSERT INTO memory_people (scope_key, person_rowid, memory_rowid) SELECT %s, %s, memory_rowid "
                "FROM memory_people WHERE scope_key = %s AND person_rowid = %s ON CONFLICT DO NOTHING",
                (key, b.rowid, key, a.rowid),
            )
            for alias in (a.name, *a.aliases):
                b.add_alias(alias)
            b.relationship = b.relationship or a.relationship
            delete(conn, a)
            save(conn, b, now)
            rows.audit(conn, key, b.id, "person_merged", owner, now, {"from": a.id, "into": b.id})
            announce(conn, owner)
            return Merge(a, b, b)

        return await self._db.run(run)

    async def add_alias(self, scope: Scope, phrase: str, alias: str) -> StoredPerson | None:
        now = self._clock()
        owner = scope.user_id

        def run(conn: Conn) -> StoredPerson | None:
            lock_owner(conn, owner)
            person = find(conn, scope, phrase, now)
            if person is None:
                return None
            holder = find(conn, scope, alias, now)
            if (
                holder is not None
                and holder.id != person.id
                and normalise_name(alias) in {normalise_name(n) for n in (holder.name, *holder.aliases)}
            ):
                raise AliasTaken(holder.id)
            if person.add_alias(alias):
                save(conn, person, now)
                announce(conn, owner)
            return person

        return await self._db.run(run)

    async def forget(self, scope: Scope, phrase: str, *, delete_person: bool) -> Forgotten | None:
        now = self._clock()

        def run(conn: Conn) -> Forgotten | None:
            lock_owner(conn, scope.user_id)
            person = find(conn, scope, phrase, now)
            if person is None:
                return None
            found = memories_about(conn, scope, [person.rowid], now, include_expired=True)
            rows.mark_deleted(conn, [rowid for rowid, _ in found], now)
            for rowid, record in found:
                key = conn.execute("SELECT scope_key FROM memories WHERE rowid = %s", (rowid,)).fetchone()
                rows.audit(conn, key[0] if key else "", record.id, "deleted", scope.user_id, now,
                           {"chat_id": scope.chat_id, "reason": "forget_person", "person_id": person.id})  # fmt: skip
            if delete_person:
                delete(conn, person)
            announce(conn, scope.user_id)
            for key in scope.visible_keys():
                notices.send(conn, notices.CHANGES, key)
            rows.audit(conn, personal_key(scope.user_id), person.id, "person_forgotten", scope.user_id, now,
                       {"memories": len(found), "person_deleted": delete_person, "chat_id": scope.chat_id})  # fmt: skip
            return Forgotten(person, [record.id for _, record in found], delete_person)

        return await self._db.run(run)

    async def summary_material(self, scope: Scope, limit: int) -> SummaryMaterial:
        def run(conn: Conn) -> SummaryMaterial:
            found = rows.list_visible(
                conn,
                scope,
                limit=limit,
                offset=0,
                before_id=None,
                include_expired=False,
                about=None,
                now_ms=self._clock(),
            )
            annotate(conn, scope, found)
            return SummaryMaterial(found, visible_people(conn, scope, self._clock()))

        return await self._db.run(run)
