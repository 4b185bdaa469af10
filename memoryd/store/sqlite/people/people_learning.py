"""What a new memory teaches about the owner's people, on SQLite: the rules of
``store.people_learning`` over each owner's people, indexed and kept between adds while their
generation (``people_generation``) has not moved.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import apsw

from memoryd.knowledge.people import RelationshipFact
from memoryd.store.people_learning import KnownPeople, learn_people
from memoryd.store.people_records import Learned, StoredPerson
from memoryd.store.people_rules import tells_nothing_new
from memoryd.store.sqlite.people import people
from memoryd.store.visibility import Scope, covers

__all__ = ["Learned", "learn"]

#: Owners whose indexed people the writer keeps between adds.
_CACHED_OWNERS = 256


@dataclass
class _Known(KnownPeople):
    """One owner's people as of ``generation`` (``people_generation``: a random number each
    write to ``people`` replaces, by trigger).  ``generation`` None: being changed by a
    transaction that has not finished learning."""

    generation: int | None = None


#: (database file, owner) -> their people, read and changed inside write transactions only.
#: Learning keeps an entry up to date with what it writes and then stamps it with the
#: generation its own writes left; a transaction that rolls back leaves the entry stamped with
#: a generation the database never keeps (or with None, when it failed half way), so the next
#: learn reads the people again.
_cache: OrderedDict[tuple[str, str], _Known] = OrderedDict()


def _generation(db: apsw.Connection, owner: str) -> int:
    row = db.execute("SELECT generation FROM people_generation WHERE owner = ?", (owner,)).fetchone()
    return 0 if row is None else int(row[0])


def _known(db: apsw.Connection, owner: str) -> _Known:
    generation = _generation(db, owner)
    key = (db.filename, owner)
    found = _cache.get(key)
    if found is not None and found.generation == generation:
        _cache.move_to_end(key)
        return found
    fresh = KnownPeople.of(people.people_of(db, owner))
    known = _Known(fresh.persons, fresh.by_id, fresh.index, fresh.finder, generation)
    if db.filename:  # an in-memory database has no name to tell it from another
        _cache[key] = known
        if len(_cache) > _CACHED_OWNERS:
            _cache.popitem(last=False)
    return known


def learn(
    db: apsw.Connection,
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
) -> Learned:
    """``store.people_learning.learn_people`` for the memory ``memory_rowid``.  ``seen_by``: the adder;
    the memory is matched only against the people it may know of (``people.visible_rowids``,
    asked for the few people a match picks, not for all of them)."""
    known = _known(db, owner)
    learned = learn_people(
        known,
        _Writes(db, known, owner, memory_rowid, now_ms, seen_by),
        content=content,
        subjects=subjects,
        owner_names=owner_names,
        max_people=max_people,
        strict=strict,
    )
    if known.generation is None:
        known.generation = _generation(db, owner)
    return learned


@dataclass
class _Writes:
    """``store.people_learning.PeopleWrites`` on SQLite, for one owner's people and one memory."""

    db: apsw.Connection
    known: _Known
    owner: str
    memory_rowid: int
    now_ms: int
    seen_by: Scope | None

    def visible(self, rowid: int) -> bool:
        return self.seen_by is None or rowid in people.visible_rowids(self.db, self.seen_by, [rowid], self.now_ms)

    def may_tell(self, person: StoredPerson, fact: RelationshipFact) -> bool:
        return self.seen_by is None or _may_tell(self.db, person, fact, self.memory_rowid)

    def changing(self) -> None:
        self.known.generation = None

    def create(self, name: str, *, relationship: str | None = None, aliases: Sequence[str] = ()) -> StoredPerson:
        return people.create(self.db, self.owner, name, self.now_ms, relationship=relationship, aliases=aliases)

    def save(self, person: StoredPerson) -> None:
        people.save(self.db, person, self.now_ms)

    def link(self, person_rowids: Iterable[int]) -> None:
        people.link(self.db, person_rowids, self.memory_rowid)


def _may_tell(db: apsw.Connection, person: StoredPerson, fact: RelationshipFact, memory_rowid: int) -> bool:
    """Whether the memory may add ``fact``'s name, aliases or relationship to ``person``: it
    tells nothing new, or everyone who knows the person (through a memory linked to it) may
    also see this memory."""
    if tells_nothing_new(person, fact):
        return True
    here = db.execute("SELECT scope_key, chat_id, disclosure FROM memories WHERE rowid = ?", (memory_rowid,)).fetchone()
    linked = db.execute(
        "SELECT DISTINCT memories.scope_key, memories.chat_id, memories.disclosure FROM memory_people AS link "
        "CROSS JOIN memories ON memories.rowid = link.memory_rowid "
        "WHERE link.person_rowid = ? AND memories.deleted_at_ms IS NULL AND memories.rowid != ?",
        (person.rowid, memory_rowid),
    )
    return here is not None and all(covers(tuple(here), tuple(other)) for other in linked)
