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

from collections.abc import Sequence
from dataclasses import dataclass

import apsw

from memoryd.knowledge import MentionFinder, merge_target, normalise_name, parse_relationships, resolve_person
from memoryd.knowledge.people import is_relationship_phrase
from memoryd.store.sqlite.people import people
from memoryd.store.sqlite.people.people import StoredPerson

#: Subjects that name the owner, never a person in their life.
_SELF_WORDS = frozenset({"i", "me", "myself", "user", "the user", "self", "owner"})


@dataclass(frozen=True)
class Learned:
    linked: list[str]  # names of the people the memory is about
    changed: bool  # a person was created, renamed or given an alias or relationship


def learn(
    db: apsw.Connection, *, owner: str, memory_rowid: int, content: str, subjects: Sequence[str],
    owner_names: Sequence[str], now_ms: int,
) -> Learned:
    known = people.people_of(db, owner)
    by_id = {person.id: person for person in known}
    own = {normalise_name(name) for name in owner_names if name} | _SELF_WORDS
    about: dict[int, StoredPerson] = {}
    dirty: set[int] = set()
    created = False

    for fact in parse_relationships(content):
        if normalise_name(fact.name) in own:
            continue
        target = merge_target(fact, [p.known() for p in known])
        if target is None:
            person = people.create(db, owner, fact.name, now_ms, relationship=fact.relationship, aliases=fact.aliases)
            known.append(person)
            by_id[person.id] = person
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

    for subject in subjects:
        wanted = normalise_name(subject)
        if not wanted or wanted in own:
            continue
        found = resolve_person(subject, [p.known() for p in known])
        if found is not None:
            about.setdefault(by_id[found.key].rowid, by_id[found.key])
        elif not is_relationship_phrase(subject):
            person = people.create(db, owner, subject, now_ms)
            known.append(person)
            by_id[person.id] = person
            about[person.rowid] = person
            created = True

    if known:
        for mention in MentionFinder([p.known() for p in known]).find(content):
            if mention.person is not None:
                person = by_id[mention.person.key]
                about.setdefault(person.rowid, person)

    for person in known:
        if person.rowid in dirty:
            people.save(db, person, now_ms)
    people.link(db, about, memory_rowid)
    return Learned([p.name for p in about.values()], created or bool(dirty))
