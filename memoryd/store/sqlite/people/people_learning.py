"""What a new memory teaches about the owner's people, and which of them it is about.

Three sources, in this order, inside the add's own write transaction for the people table:

1. relationship statements in the content ("My wife's name is Sarah", "my boss Tom ..."): the
   person is found (``knowledge.merge_target``: same name, or the holder of a one-at-a-time
   relationship, so a new name for "my wife" becomes an alias, not a second wife) or created,
   with the relationship and its alias ("my wife");
2. ``subjects`` (given by the caller or by extraction): resolved, else created by that name
   (a relationship phrase with nobody behind it, or the owner's own name, creates nobody);
3. known people mentioned in the content (``knowledge.MentionFinder``: "Sarah", "my wife").
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from memoryd.errors import PeopleLimitReached
from memoryd.knowledge import KnownPerson, MentionFinder, PersonIndex, normalise_name, parse_relationships
from memoryd.knowledge.people import (
    MAX_HIDDEN_PICKS,
    SELF_WORDS,
    RelationshipFact,
    is_relationship_phrase,
    new_subjects,
)
from memoryd.store.sqlite.people import people
from memoryd.store.sqlite.people.people import StoredPerson
from memoryd.store.visibility import Scope, covers

#: Owners whose indexed people the writer keeps between adds.
_CACHED_OWNERS = 256


@dataclass(frozen=True)
class Learned:
    linked: list[str]  # names of the people the memory is about
    changed: bool  # a person was created, renamed or given an alias or relationship
    people: int = 0  # the owner's people afterwards


@dataclass
class _Known:
    """One owner's people as of ``generation`` (``people_generation``: a random number each
    write to ``people`` replaces, by trigger), indexed for resolution and for mentions.
    ``generation`` None: being changed by a transaction that has not finished learning."""

    generation: int | None
    persons: list[StoredPerson]
    by_id: dict[str, StoredPerson]
    index: PersonIndex
    finder: MentionFinder

    def add(self, person: StoredPerson) -> None:
        """A person created, or given an alias or a relationship, by this transaction."""
        if person.id not in self.by_id:
            self.persons.append(person)
            self.by_id[person.id] = person
        known = person.known()
        self.index.add(known)
        self.finder.add(known)


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
    persons = people.people_of(db, owner)
    knowns = [p.known() for p in persons]
    known = _Known(generation, persons, {p.id: p for p in persons}, PersonIndex(knowns), MentionFinder(knowns))
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
    """``seen_by``: the adder; the memory is matched only against the people it may know of
    (``people.visible_rowids``, asked for the few people a match picks, not for all of them), so
    "my wife" said in a group chat never links to, and so never reveals, a wife known only from
    a private chat: it creates a person of its own there.

    ``max_people``: the owner never has more people than this; a person the content names
    past it is not created, and with ``strict`` (memory.add: the caller chose the subjects) a
    subject that would create one raises PeopleLimitReached (the caller's transaction then
    stores nothing)."""
    known = _known(db, owner)
    index, by_id = known.index, known.by_id
    own = {normalise_name(name) for name in owner_names if name} | SELF_WORDS
    seen: dict[int, bool] = {}

    def knowable(key: str) -> bool:
        person = by_id[key]
        if seen_by is None:
            return True
        if person.rowid not in seen:
            seen[person.rowid] = person.rowid in people.visible_rowids(db, seen_by, [person.rowid], now_ms)
        return seen[person.rowid]

    def first_knowable(pick: Callable[[set[str]], KnownPerson | None]) -> KnownPerson | None:
        # Another person may answer the same phrase when the first one picked is hidden.
        hidden: set[str] = set()
        for _ in range(MAX_HIDDEN_PICKS):
            found = pick(hidden)
            if found is None or knowable(found.key):
                return found
            hidden.add(found.key)
        return None

    def resolve(subject: str) -> KnownPerson | None:
        return first_knowable(functools.partial(index.resolve, subject))

    about: dict[int, StoredPerson] = {}
    dirty: set[int] = set()
    created = False
    # Mentions are looked for among the people known before this memory: the ones it creates
    # or changes are linked already.
    mentioned = (
        [m.person.key for m in known.finder.find(content) if m.person is not None and knowable(m.person.key)]
        if known.persons
        else []
    )

    def room() -> bool:
        return max_people is None or len(known.persons) < max_people

    if strict and max_people is not None:
        # Refused before anything changes: the cached people stay valid for the next add.
        _check_subjects_fit(resolve, own, subjects, len(known.persons), max_people)

    def create(name: str, **extra: Any) -> StoredPerson:
        known.generation = None
        person = people.create(db, owner, name, now_ms, **extra)
        known.add(person)
        seen[person.rowid] = True
        return person

    for fact in parse_relationships(content):
        if normalise_name(fact.name) in own:
            continue
        target = first_knowable(functools.partial(index.merge_target, fact))
        if target is not None and seen_by is not None and not _may_tell(db, by_id[target.key], fact, memory_rowid):
            target = None  # a person of its own: what this memory says stays where it may be seen
        if target is None:
            if not room():
                continue
            person = create(fact.name, relationship=fact.relationship, aliases=fact.aliases)
            created = True
        else:
            person = by_id[target.key]
            known.generation = None  # add_alias changes the cached person in place
            changed = person.add_alias(fact.name)
            for alias in fact.aliases:
                changed = person.add_alias(alias) or changed
            if person.relationship is None:
                person.relationship, changed = fact.relationship, True
            if changed:
                dirty.add(person.rowid)
                known.add(person)
        about[person.rowid] = person

    for position, subject in enumerate(subjects):
        wanted = normalise_name(subject)
        if not wanted or wanted in own:
            continue
        found = resolve(subject)
        if found is not None:
            about.setdefault(by_id[found.key].rowid, by_id[found.key])
        elif not is_relationship_phrase(subject):
            if not room():
                if strict:
                    raise PeopleLimitReached(f"subjects[{position}]", max_people or 0)
                continue
            person = create(subject)
            about[person.rowid] = person
            created = True

    for key in mentioned:
        person = by_id[key]
        about.setdefault(person.rowid, person)

    for person in about.values():
        if person.rowid in dirty:
            people.save(db, person, now_ms)
    people.link(db, about, memory_rowid)
    if known.generation is None:
        known.generation = _generation(db, owner)
    return Learned([p.name for p in about.values()], created or bool(dirty), len(known.persons))


def _check_subjects_fit(
    resolve: Callable[[str], KnownPerson | None], own: set[str], subjects: Sequence[str], have: int, limit: int
) -> None:
    new = new_subjects(resolve, own, subjects)
    if have + len(new) > limit:
        raise PeopleLimitReached(f"subjects[{new[max(limit - have, 0)]}]", limit)


def _may_tell(db: apsw.Connection, person: StoredPerson, fact: RelationshipFact, memory_rowid: int) -> bool:
    """Whether the memory may add ``fact``'s name, aliases or relationship to ``person``: it
    tells nothing new, or everyone who knows the person (through a memory linked to it) may
    also see this memory.  Otherwise "Sarah Klein is my wife" said in a private chat would make
    a group that knows Sarah Klein from its own memories see "wife"."""
    names = {normalise_name(name) for name in (person.name, *person.aliases)}
    news = normalise_name(fact.name) not in names or any(normalise_name(a) not in names for a in fact.aliases)
    if not news and person.relationship is not None:
        return True
    here = db.execute("SELECT scope_key, chat_id, disclosure FROM memories WHERE rowid = ?", (memory_rowid,)).fetchone()
    linked = db.execute(
        "SELECT DISTINCT memories.scope_key, memories.chat_id, memories.disclosure FROM memory_people AS link "
        "CROSS JOIN memories ON memories.rowid = link.memory_rowid "
        "WHERE link.person_rowid = ? AND memories.deleted_at_ms IS NULL AND memories.rowid != ?",
        (person.rowid, memory_rowid),
    )
    return here is not None and all(covers(tuple(here), tuple(other)) for other in linked)
