"""``PeopleRepository``: what the person.* methods, the add path and context need of people.

Each coroutine runs one small function of ``people`` / ``people_learning`` on the writer or a
reader, off the event loop.  People are looked up by the caller's user id only; memories
about them are read through ``visibility.predicate`` (``people.memories_about``).
A lookup that finds nobody answers None; the service turns that into its error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import apsw
import msgspec

from memoryd.store.erasure_log import ErasureLog
from memoryd.store.people_learning import learn_each
from memoryd.store.people_records import Forgotten, Merge, SummaryMaterial
from memoryd.store.people_rules import check_alias_free, find_person
from memoryd.store.records import MemoryRecord
from memoryd.store.sqlite.admin import erasure
from memoryd.store.sqlite.db.database import Database
from memoryd.store.sqlite.memories import memories
from memoryd.store.sqlite.people import people, people_learning
from memoryd.store.sqlite.people.people import StoredPerson
from memoryd.store.sqlite.people.people_learning import Learned
from memoryd.store.sqlite.search import people_retriever
from memoryd.store.visibility import Scope


def find(db: apsw.Connection, scope: Scope, phrase: str, now_ms: int) -> StoredPerson | None:
    """The caller's person named by ``phrase`` (a person id, a name, an alias, a relationship)
    among those ``scope`` may know of (``people.visible_people``)."""
    return find_person(people.visible_people(db, scope, now_ms), phrase)


def _rowids(db: apsw.Connection, memory_ids: Sequence[str]) -> dict[str, int]:
    """memory id -> rowid, for those of ``memory_ids`` that exist and are not deleted (a memory
    deleted since its add teaches no people: a forgotten person must not come back from it)."""
    rows = db.execute(
        "SELECT id, rowid FROM memories WHERE id IN (SELECT value FROM json_each(?)) AND deleted_at_ms IS NULL",
        (msgspec.json.encode(list(memory_ids)).decode(),),
    )
    return {memory_id: int(rowid) for memory_id, rowid in rows}


class PeopleRepository:
    def __init__(self, db: Database, clock: Callable[[], int]) -> None:
        self._db = db
        self._clock = clock

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
    ) -> Learned:
        """Create or update the people ``content`` and ``subjects`` name and link them to the
        memory (see ``people_learning``; ``seen_by``: the adder, whose people it matches)."""
        now = self._clock()

        def run(db: apsw.Connection) -> Learned:
            learned = learn_each(
                functools.partial(people_learning.learn, db),
                _rowids(db, [memory_id]),
                [(memory_id, content, subjects)],
                owner=owner,
                owner_names=owner_names,
                now_ms=now,
                max_people=max_people,
                seen_by=seen_by,
            )
            return learned[0]

        return await self._db.write(run)

    def learn_many(
        self, owner: str, memories_of: Sequence[tuple[str, str, Sequence[str]]], owner_names: Sequence[str]
    ) -> int:
        """``learn`` for many (memory id, content, subjects) in one transaction (benchmarks,
        tests).  Synchronous: not for the event loop."""
        now = self._clock()

        def run(db: apsw.Connection) -> int:
            learn = functools.partial(people_learning.learn, db)
            rowids = _rowids(db, [m[0] for m in memories_of])
            return len(learn_each(learn, rowids, memories_of, owner=owner, owner_names=owner_names, now_ms=now))

        return self._db.write_sync(run)

    async def people_of(self, owner: str) -> list[StoredPerson]:
        return await self._db.read(people.people_of, owner)

    async def visible_people(self, scope: Scope) -> list[StoredPerson]:
        """The caller's people ``scope`` may know of: learned from a memory it may see."""
        return await self._db.read(people.visible_people, scope, self._clock())

    async def visible_rowids(self, scope: Scope, person_rowids: Sequence[int]) -> set[int]:
        return await self._db.read(people.visible_rowids, scope, list(person_rowids), self._clock())

    async def find(self, scope: Scope, phrase: str) -> StoredPerson | None:
        return await self._db.read(find, scope, phrase, self._clock())

    async def memories_about(self, scope: Scope, person: StoredPerson, *, limit: int) -> list[MemoryRecord]:
        """The memories about ``person`` that ``scope`` may see, newest first, with ``about``."""

        def run(db: apsw.Connection) -> list[MemoryRecord]:
            rows = people.memories_about(db, scope, [person.rowid], self._clock(), limit=limit)
            records = [record for _, record in rows]
            people_retriever.annotate(db, scope, records)
            return records

        return await self._db.read(run)

    async def counts(self, scope: Scope, persons: Sequence[StoredPerson]) -> dict[str, int]:
        """person id -> how many memories about them ``scope`` may see."""

        def run(db: apsw.Connection) -> dict[str, int]:
            found = people.counts_about(db, scope, [p.rowid for p in persons], self._clock())
            return {p.id: found.get(p.rowid, 0) for p in persons}

        return await self._db.read(run)

    async def merge(self, scope: Scope, source: str, target: str) -> Merge:
        """Fold the person ``source`` names into the one ``target`` names (both among the people
        ``scope`` may know of); when either names nobody, or both the same person, nothing
        changes (``merged`` is None)."""
        now = self._clock()
        owner = scope.user_id

        def run(db: apsw.Connection) -> Merge:
            a, b = find(db, scope, source, now), find(db, scope, target, now)
            if a is None or b is None or a.id == b.id:
                return Merge(a, b, None)
            merged = people.merge(db, a, b, now)
            memories.audit(db, merged.id, "person_merged", owner, now, {"from": a.id, "into": b.id})
            return Merge(a, b, merged)

        return await self._db.write(run)

    async def add_alias(self, scope: Scope, phrase: str, alias: str) -> StoredPerson | None:
        """Give the person ``phrase`` names (among those ``scope`` may know of) another alias;
        None if nobody; AliasTaken if the alias already names someone else the caller knows."""
        now = self._clock()

        def run(db: apsw.Connection) -> StoredPerson | None:
            person = find(db, scope, phrase, now)
            if person is None:
                return None
            holder = find(db, scope, alias, now)
            check_alias_free(person, holder, alias)
            if person.add_alias(alias):
                people.save(db, person, now)
            return person

        return await self._db.write(run)

    async def forget(self, scope: Scope, phrase: str, *, delete_person: bool) -> Forgotten | None:
        """Delete the memories about the person ``phrase`` names that ``scope`` may see
        (audited), and the person unless ``delete_person`` is false; None if nobody."""
        now = self._clock()

        def run(db: apsw.Connection) -> Forgotten | None:
            person = find(db, scope, phrase, now)
            if person is None:
                return None
            deleted = people.delete_memories_about(db, scope, person, now, "forget_person")
            if delete_person:
                people.delete(db, person)
            memories.audit(
                db,
                person.id,
                "person_forgotten",
                scope.user_id,
                now,
                {"memories": len(deleted), "person_deleted": delete_person, "chat_id": scope.chat_id},
            )
            return Forgotten(person, deleted, delete_person)

        return await self._db.write(run)

    async def erasure_mark(self) -> ErasureLog | None:
        """The ``meta`` value every erasure appends to (``admin.erasure``): one key look-up."""
        return await self._db.read(erasure.erasure_mark)

    async def summary_material(self, scope: Scope, limit: int) -> SummaryMaterial:
        """The newest ``limit`` memories ``scope`` may see (with ``about``), and the owner's
        people: what a summary is built from.  Not counted as hits: nobody asked for them."""

        def run(db: apsw.Connection) -> SummaryMaterial:
            records = memories.list_visible(
                db, scope, limit=limit, offset=0, before_id=None, include_expired=False, now_ms=self._clock()
            )
            people_retriever.annotate(db, scope, records)
            return SummaryMaterial(records, people.visible_people(db, scope, self._clock()))

        return await self._db.read(run)
