"""People's rules both engines apply outside learning: when a memory tells a person nothing new,
the person a phrase names, what a merge folds into the person kept, and when an alias is taken."""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.ids import is_id_prefix
from memoryd.knowledge import normalise_name, resolve_person
from memoryd.knowledge.people import RelationshipFact
from memoryd.store.people_records import AliasTaken, StoredPerson


def tells_nothing_new(person: StoredPerson, fact: RelationshipFact) -> bool:
    """``fact`` names the person by names it has and the person has a relationship already: the
    memory may link to it wherever it was said.  Otherwise what it adds must stay where everyone
    who knows the person may see the memory ("Sarah Klein is my wife" said in a private chat
    must not make a group that knows Sarah Klein from its own memories see "wife")."""
    names = {normalise_name(name) for name in (person.name, *person.aliases)}
    news = normalise_name(fact.name) not in names or any(normalise_name(a) not in names for a in fact.aliases)
    return not news and person.relationship is not None


def find_person(known: Sequence[StoredPerson], phrase: str) -> StoredPerson | None:
    """The person ``phrase`` names among ``known``: a person id, else a name, an alias or a
    relationship (``knowledge.resolve_person``)."""
    wanted = phrase.strip()
    if is_id_prefix(wanted.upper()):
        for person in known:
            if person.id == wanted.upper():
                return person
    found = resolve_person(wanted, [p.known() for p in known])
    return None if found is None else next(p for p in known if p.id == found.key)


def fold_person(source: StoredPerson, target: StoredPerson) -> None:
    """``target`` takes ``source``'s name and aliases as aliases, and its relationship when it
    has none (a merge; the engine moves the links and deletes ``source``)."""
    for alias in (source.name, *source.aliases):
        target.add_alias(alias)
    target.relationship = target.relationship or source.relationship


def check_alias_free(person: StoredPerson, holder: StoredPerson | None, alias: str) -> None:
    """AliasTaken when ``alias`` already names ``holder``, another of the owner's people than ``person``."""
    if (
        holder is not None
        and holder.id != person.id
        and normalise_name(alias) in {normalise_name(n) for n in (holder.name, *holder.aliases)}
    ):
        raise AliasTaken(holder.id)
