"""What a new memory teaches about the owner's people, and which of them it is about: the rules
every engine applies, over the engine's reads and writes (``PeopleWrites``).

Three sources, in this order, inside the add's own write transaction for the people table:

1. relationship statements in the content ("My wife's name is Sarah", "my boss Tom ..."): the
   person is found (``knowledge.merge_target``: same name, or the holder of a one-at-a-time
   relationship, so a new name for "my wife" becomes an alias, not a second wife) or created,
   with the relationship and its alias ("my wife");
2. ``subjects`` (given by the caller or by extraction): resolved, else created by that name
   (a relationship phrase with nobody behind it, or the owner's own name, creates nobody);
3. known people mentioned in the content (``knowledge.MentionFinder``: "Sarah", "my wife"),
   looked for among the people known before this memory: the ones it creates or changes are
   linked already.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from memoryd.errors import PeopleLimitReached
from memoryd.knowledge import (
    KnownPerson,
    MentionFinder,
    PersonIndex,
    normalise_name,
    parse_relationships,
)
from memoryd.knowledge.people import (
    MAX_HIDDEN_PICKS,
    SELF_WORDS,
    RelationshipFact,
    is_relationship_phrase,
    new_subjects,
)
from memoryd.store.people_records import Learned, StoredPerson
from memoryd.store.visibility import Scope


@dataclass
class KnownPeople:
    """One owner's people, indexed for resolution and for mentions."""

    persons: list[StoredPerson]
    by_id: dict[str, StoredPerson]
    index: PersonIndex
    finder: MentionFinder

    @classmethod
    def of(cls, persons: list[StoredPerson]) -> KnownPeople:
        knowns = [p.known() for p in persons]
        return cls(persons, {p.id: p for p in persons}, PersonIndex(knowns), MentionFinder(knowns))

    def add(self, person: StoredPerson) -> None:
        """A person created, or given an alias or a relationship, by this transaction."""
        if person.id not in self.by_id:
            self.persons.append(person)
            self.by_id[person.id] = person
        known = person.known()
        self.index.add(known)
        self.finder.add(known)


class PeopleWrites(Protocol):
    """What learning needs of an engine, inside the add's transaction, for one owner and memory."""

    def visible(self, rowid: int) -> bool:
        """Whether the adder may know of this person (True when no adder is named)."""
        ...

    def may_tell(self, person: StoredPerson, fact: RelationshipFact) -> bool:
        """Whether the memory may add ``fact`` to ``person`` (``tells_nothing_new``, or everyone
        who knows the person may see the memory; True when no adder is named)."""
        ...

    def changing(self) -> None:
        """A person is about to be created or changed (an engine's cache of the people goes stale)."""
        ...

    def create(self, name: str, *, relationship: str | None = None, aliases: Sequence[str] = ()) -> StoredPerson: ...

    def save(self, person: StoredPerson) -> None: ...

    def link(self, person_rowids: Iterable[int]) -> None:
        """Link these people to the memory."""
        ...


def learn_people(
    known: KnownPeople,
    writes: PeopleWrites,
    *,
    content: str,
    subjects: Sequence[str],
    owner_names: Sequence[str],
    max_people: int | None,
    strict: bool,
) -> Learned:
    """The people ``content`` and ``subjects`` name, created or updated through ``writes`` and
    linked to the memory.  A phrase is matched only against the people ``writes.visible``, so
    "my wife" said in a group chat never links to, and so never reveals, a wife known only from
    a private chat: it creates a person of its own there.

    ``max_people``: the owner never has more people than this; a person the content names past
    it is not created, and with ``strict`` (memory.add: the caller chose the subjects) a subject
    that would create one raises PeopleLimitReached (the caller's transaction then stores
    nothing)."""
    index, by_id = known.index, known.by_id
    own = {normalise_name(name) for name in owner_names if name} | SELF_WORDS
    seen: dict[int, bool] = {}

    def knowable(key: str) -> bool:
        person = by_id[key]
        if person.rowid not in seen:
            seen[person.rowid] = writes.visible(person.rowid)
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
    mentioned = (
        [m.person.key for m in known.finder.find(content) if m.person is not None and knowable(m.person.key)]
        if known.persons
        else []
    )

    def room() -> bool:
        return max_people is None or len(known.persons) < max_people

    if strict and max_people is not None:
        # Refused before anything changes (an engine's cached people stay valid).
        _check_subjects_fit(resolve, own, subjects, len(known.persons), max_people)

    def create(name: str, relationship: str | None = None, aliases: Sequence[str] = ()) -> StoredPerson:
        writes.changing()
        person = writes.create(name, relationship=relationship, aliases=aliases)
        known.add(person)
        seen[person.rowid] = True
        return person

    for fact in parse_relationships(content):
        if normalise_name(fact.name) in own:
            continue
        target = first_knowable(functools.partial(index.merge_target, fact))
        if target is not None and not writes.may_tell(by_id[target.key], fact):
            target = None  # a person of its own: what this memory says stays where it may be seen
        if target is None:
            if not room():
                continue
            person = create(fact.name, fact.relationship, fact.aliases)
            created = True
        else:
            person = by_id[target.key]
            writes.changing()  # add_alias changes the known person in place
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
            writes.save(person)
    writes.link(about)
    return Learned([p.name for p in about.values()], created or bool(dirty), len(known.persons))


class LearnOne(Protocol):
    """An engine's ``learn`` for one memory, inside the caller's transaction."""

    def __call__(
        self,
        *,
        owner: str,
        memory_rowid: int,
        content: str,
        subjects: Sequence[str],
        owner_names: Sequence[str],
        now_ms: int,
        max_people: int | None = None,
        seen_by: Scope | None = None,
    ) -> Learned: ...


def learn_each(
    learn: LearnOne,
    rowids: Mapping[str, int],
    memories_of: Sequence[tuple[str, str, Sequence[str]]],
    *,
    owner: str,
    owner_names: Sequence[str],
    now_ms: int,
    max_people: int | None = None,
    seen_by: Scope | None = None,
) -> list[Learned]:
    """``learn`` for each (memory id, content, subjects) of ``memories_of`` (``rowids``: memory
    id -> rowid, of the memories still live), in one transaction.  A memory without a rowid
    (deleted or erased between its add and this call) teaches nothing: there is nothing to link."""
    learned = []
    for memory_id, content, subjects in memories_of:
        rowid = rowids.get(memory_id)
        if rowid is None:
            learned.append(Learned([], False))
            continue
        learned.append(
            learn(
                owner=owner,
                memory_rowid=int(rowid),
                content=content,
                subjects=subjects,
                owner_names=owner_names,
                now_ms=now_ms,
                max_people=max_people,
                seen_by=seen_by,
            )
        )
    return learned


def _check_subjects_fit(
    resolve: Callable[[str], KnownPerson | None], own: set[str], subjects: Sequence[str], have: int, limit: int
) -> None:
    new = new_subjects(resolve, own, subjects)
    if have + len(new) > limit:
        raise PeopleLimitReached(f"subjects[{new[max(limit - have, 0)]}]", limit)
