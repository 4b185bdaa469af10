"""People's value types: a stored person (and its row), what learning, merge and forget did, a
summary's material, and what a search knows about the people a query names (``PeopleFocus``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from memoryd.ids import iso_from_ms, new_ulid
from memoryd.knowledge import KnownPerson, normalise_name
from memoryd.store.records import MemoryRecord


@dataclass(frozen=True)
class PeopleFocus:
    """What a search knows about people: who the query mentions (their memories join the
    fusion) and, with an ``about`` filter, the only people whose memories may be answered."""

    mentioned: tuple[int, ...] = ()  # person rowids, of the caller's own people
    only: tuple[int, ...] | None = None  # None: no about filter
    #: The query without the words that name the people ("what does my wife like" -> "what
    #: does like"): what ranks their memories among themselves.
    rest: str = ""

    @property
    def ranked_people(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys((*self.mentioned, *(self.only or ()))))


#: The columns of ``people`` that ``person_from_row`` reads, in its order.
PERSON_COLUMNS = "rowid, id, owner, name, aliases, relationship, created_at_ms, updated_at_ms"


@dataclass(frozen=True)
class Learned:
    """What learning from one memory did (``people_learning.learn_people``)."""

    linked: list[str]  # names of the people the memory is about
    changed: bool  # a person was created, renamed or given an alias or relationship
    people: int = 0  # the owner's people afterwards


@dataclass(frozen=True)
class SummaryMaterial:
    records: list[MemoryRecord]  # newest first
    people: list[StoredPerson]


@dataclass(frozen=True)
class Merge:
    source: StoredPerson | None
    target: StoredPerson | None
    merged: StoredPerson | None


@dataclass(frozen=True)
class Forgotten:
    person: StoredPerson
    memory_ids: list[str]
    person_deleted: bool


class AliasTaken(Exception):
    """The alias already names another of the owner's people (the service says which field)."""


@dataclass
class StoredPerson:
    rowid: int
    id: str
    owner: str
    name: str
    aliases: list[str] = field(default_factory=list)
    relationship: str | None = None
    created_at_ms: int = 0
    updated_at_ms: int = 0

    def known(self) -> KnownPerson:
        """The knowledge rules' view (``key`` is the person id)."""
        return KnownPerson(self.id, self.name, tuple(self.aliases), self.relationship)

    def wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "aliases": list(self.aliases),
            "relationship": self.relationship,
            "created_at": iso_from_ms(self.created_at_ms),
            "updated_at": iso_from_ms(self.updated_at_ms),
        }

    def add_alias(self, alias: str) -> bool:
        """Add ``alias`` unless it is already a name of this person; True when added."""
        wanted = normalise_name(alias)
        if not wanted or wanted == normalise_name(self.name) or wanted in {normalise_name(a) for a in self.aliases}:
            return False
        self.aliases.append(" ".join(alias.split()))
        return True


def person_from_row(row: Sequence[Any]) -> StoredPerson:
    """A person from a row of ``PERSON_COLUMNS`` (the aliases stored as a JSON list)."""
    rowid, id_, owner, name, aliases, relationship, created, updated = row
    return StoredPerson(
        int(rowid), id_, owner, name, list(msgspec.json.decode(aliases)), relationship, int(created), int(updated)
    )


def new_person(
    owner: str, name: str, now_ms: int, *, relationship: str | None = None, aliases: Sequence[str] = ()
) -> StoredPerson:
    """A person not stored yet (rowid 0): a new id, the name's spacing folded, the aliases that
    are not its name."""
    person = StoredPerson(0, new_ulid(now_ms), owner, " ".join(name.split()), [], relationship, now_ms, now_ms)
    for alias in aliases:
        person.add_alias(alias)
    return person
