"""``PeopleStore``: the person.* methods', the add path's and the context's view of people."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memoryd.store.erasure_log import ErasureLog
from memoryd.store.people_records import Forgotten, Merge, StoredPerson, SummaryMaterial
from memoryd.store.records import MemoryRecord
from memoryd.store.visibility import Scope


class PeopleLearned(Protocol):
    """What learning from one memory did."""

    @property
    def linked(self) -> list[str]:
        """The names of the people the memory is about."""
        ...

    @property
    def changed(self) -> bool:
        """A person was created, renamed, or given an alias or relationship."""
        ...


class PeopleStore(Protocol):
    """Each owner's people (names, aliases, relationship) and the memories about them."""

    async def learn(
        self,
        owner: str,
        memory_id: str,
        content: str,
        subjects: Sequence[str],
        owner_names: Sequence[str],
        *,
        max_people: int | None = None,
        seen_by: Scope | None = None,
    ) -> PeopleLearned:
        """Create or update the people ``content`` and ``subjects`` name (the owner going by
        ``owner_names``) and link them to the memory.  ``seen_by`` is the adder: a phrase is
        matched only to people it may know of, and a memory adds a name, alias or relationship
        to a person only when everyone who knows that person may see the memory.  With
        ``max_people``, nobody is created past that many people (the memory is still linked to
        those it names who exist)."""
        ...

    async def people_of(self, owner: str) -> list[StoredPerson]: ...

    async def visible_people(self, scope: Scope) -> list[StoredPerson]:
        """The owner's people ``scope`` may know of: learned from a memory it may see."""
        ...

    async def visible_rowids(self, scope: Scope, person_rowids: Sequence[int]) -> set[int]:
        """Which of ``person_rowids`` ``scope`` may know of."""
        ...

    async def find(self, scope: Scope, phrase: str) -> StoredPerson | None:
        """The person ``phrase`` names (id, unique id prefix, name, alias or relationship)
        among those ``scope`` may know of, or None."""
        ...

    async def memories_about(self, scope: Scope, person: StoredPerson, *, limit: int) -> list[MemoryRecord]:
        """What ``scope`` may see about ``person``, newest first."""
        ...

    async def counts(self, scope: Scope, persons: Sequence[StoredPerson]) -> dict[str, int]:
        """person id -> how many memories about them ``scope`` may see."""
        ...

    async def merge(self, scope: Scope, source: str, target: str) -> Merge:
        """Fold ``source`` into ``target`` (aliases and memory links), both among the people
        ``scope`` may know of; nothing changes when either names nobody or both name the same
        person."""
        ...

    async def add_alias(self, scope: Scope, phrase: str, alias: str) -> StoredPerson | None:
        """Give the person ``phrase`` names (among those ``scope`` may know of) another alias;
        AliasTaken when the alias names another person the caller knows."""
        ...

    async def forget(self, scope: Scope, phrase: str, *, delete_person: bool) -> Forgotten | None:
        """Delete what ``scope`` sees about the person (and the person, if asked)."""
        ...

    async def summary_material(self, scope: Scope, limit: int) -> SummaryMaterial: ...

    async def erasure_mark(self) -> ErasureLog | None:
        """The log of recent erasures (``Maintenance.erase_user``) by any process using the
        store, such as `memoryd forget-user` beside a running daemon; it changes with every
        erasure, and a daemon drops what it caches of the users erased since it last read it
        (``store/erasure_log.py``).  None when the engine tells the daemon of erasures itself
        (PostgreSQL: NOTIFY), so nothing is read."""
        ...
