"""What a new memory teaches about the owner's people, on PostgreSQL: the rules of
``store.people_learning`` over the owner's people, read under their advisory lock (``read_people``)
in the add's transaction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from memoryd.knowledge.people import RelationshipFact
from memoryd.store.people_learning import KnownPeople, learn_people
from memoryd.store.people_records import Learned, StoredPerson, person_from_row
from memoryd.store.people_rules import tells_nothing_new
from memoryd.store.postgres.people.people import announce, create, link, read_people, save, visible_rowids
from memoryd.store.visibility import Scope, covers, personal_key

__all__ = ["Learned", "learn"]

Conn = psycopg.Connection[Any]


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
    """``store.people_learning.learn_people`` for the memory ``memory_rowid``; the other daemons hear of
    a change when it commits.  ``seen_by``: the adder; the memory is matched only against the
    people it may know of.

    ``people``: ``read_people(conn, owner)`` sent earlier in this transaction (else it is now)."""
    known = KnownPeople.of([person_from_row(r) for r in (people or read_people(conn, owner))])
    learned = learn_people(
        known,
        _Writes(conn, owner, memory_rowid, now_ms, seen_by),
        content=content,
        subjects=subjects,
        owner_names=owner_names,
        max_people=max_people,
        strict=strict,
    )
    if learned.changed:
        announce(conn, owner)
    return learned


@dataclass
class _Writes:
    """``store.people_learning.PeopleWrites`` on PostgreSQL, for one owner's people and one memory."""

    conn: Conn
    owner: str
    memory_rowid: int
    now_ms: int
    seen_by: Scope | None

    def visible(self, rowid: int) -> bool:
        return self.seen_by is None or rowid in visible_rowids(self.conn, self.seen_by, [rowid], self.now_ms)

    def may_tell(self, person: StoredPerson, fact: RelationshipFact) -> bool:
        return self.seen_by is None or _may_tell(self.conn, person, fact, self.memory_rowid)

    def changing(self) -> None:
        """Nothing is cached between transactions here."""

    def create(self, name: str, *, relationship: str | None = None, aliases: Sequence[str] = ()) -> StoredPerson:
        return create(self.conn, self.owner, name, self.now_ms, relationship=relationship, aliases=aliases)

    def save(self, person: StoredPerson) -> None:
        save(self.conn, person, self.now_ms)

    def link(self, person_rowids: Iterable[int]) -> None:
        link(self.conn, self.owner, person_rowids, self.memory_rowid)


def _may_tell(conn: Conn, person: StoredPerson, fact: RelationshipFact, memory_rowid: int) -> bool:
    """Whether the memory may add ``fact``'s name, aliases or relationship to ``person``: it
    tells nothing new, or everyone who knows the person (through a memory linked to it) may
    also see this memory."""
    if tells_nothing_new(person, fact):
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
