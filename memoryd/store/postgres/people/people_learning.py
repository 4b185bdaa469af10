"""What a new memory teaches about the owner's people, and which of them it is about, on
PostgreSQL.

The rules (relationship statements, subjects, mentions, merge targets) are the shared ones of
``memoryd.knowledge``; the owner's people are read under their advisory lock (``read_people``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from memoryd.errors import PeopleLimitReached
from memoryd.knowledge import (
    KnownPerson,
    MentionFinder,
    merge_target,
    normalise_name,
    parse_relationships,
    resolve_person,
)
from memoryd.knowledge.people import RelationshipFact, is_relationship_phrase, new_subjects
from memoryd.store.people_records import (
    StoredPerson,
)
from memoryd.store.postgres.people.people import (
    _person,
    announce,
    create,
    link,
    read_people,
    save,
    visible_rowids,
)
from memoryd.store.visibility import Scope, covers, personal_key

Conn = psycopg.Connection[Any]

#: How many hidden people a match may pick before the phrase counts as naming nobody.
_MAX_HIDDEN_PICKS = 4
_SELF_WORDS = frozenset({"i", "me", "myself", "user", "the user", "self", "owner"})


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
