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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import apsw

from memoryd.knowledge import KnownPerson, MentionFinder, merge_target, normalise_name, parse_relationships, resolve_person
from memoryd.knowledge.people import RelationshipFact, is_relationship_phrase
from memoryd.store.sqlite.people import people
from memoryd.store.sqlite.people.people import StoredPerson
from memoryd.store.visibility import Scope, covers

#: How many hidden people a match may pick before the phrase counts as naming nobody.
_MAX_HIDDEN_PICKS = 4

#: Subjects that name the owner, never a person in their life.
_SELF_WORDS = frozenset({"i", "me", "myself", "user", "the user", "self", "owner"})


@dataclass(frozen=True)
class Learned:
    linked: list[str]  # names of the people the memory is about
    changed: bool  # a person was created, renamed or given an alias or relationship


def learn(
    db: apsw.Connection, *, owner: str, memory_rowid: int, content: str, subjects: Sequence[str],
    owner_names: Sequence[str], now_ms: int, seen_by: Scope | None = None,
) -> Learned:
    """``seen_by``: the adder; the memory is matched only against the people it may know of
    (``people.visible_rowids``, asked for the few people a match picks, not for all of them), so
    "my wife" said in a group chat never links to, and so never reveals, a wife known only from
    a private chat: it creates a person of its own there."""
    known = people.people_of(db, owner)
    by_id = {person.id: person for person in known}
    seen: dict[int, bool] = {}

    def knowable(key: str) -> bool:
        person = by_id[key]
        if seen_by is None:
            return True
        if person.rowid not in seen:
            seen[person.rowid] = person.rowid in people.visible_rowids(db, seen_by, [person.rowid], now_ms)
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
    about: dict[int, StoredPerson] = {}
    dirty: set[int] = set()
    created = False

    for fact in parse_relationships(content):
        if normalise_name(fact.name) in own:
            continue
        target = first_knowable(functools.partial(merge_target, fact))
        if target is not None and seen_by is not None and not _may_tell(db, by_id[target.key], fact, memory_rowid):
            target = None  # a person of its own: what this memory says stays where it may be seen
        if target is None:
            person = created_here(people.create(
                db, owner, fact.name, now_ms, relationship=fact.relationship, aliases=fact.aliases
            ))
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
        found = first_knowable(functools.partial(resolve_person, subject))
        if found is not None:
            about.setdefault(by_id[found.key].rowid, by_id[found.key])
        elif not is_relationship_phrase(subject):
            person = created_here(people.create(db, owner, subject, now_ms))
            about[person.rowid] = person
            created = True

    if known:
        for mention in MentionFinder([p.known() for p in known]).find(content):
            if mention.person is not None and knowable(mention.person.key):
                person = by_id[mention.person.key]
                about.setdefault(person.rowid, person)

    for person in known:
        if person.rowid in dirty:
            people.save(db, person, now_ms)
    people.link(db, about, memory_rowid)
    return Learned([p.name for p in about.values()], created or bool(dirty))


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
