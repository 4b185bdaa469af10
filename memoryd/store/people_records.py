"""People's value types: a stored person, what merge and forget did, a summary's material, and
what a search knows about the people a query names (``PeopleFocus``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memoryd.ids import iso_from_ms
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
