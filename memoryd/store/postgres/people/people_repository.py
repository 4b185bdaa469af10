"""``People``: ``interfaces.PeopleStore`` on PostgreSQL, each call one transaction of
``people`` / ``people_learning``."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import psycopg

from memoryd.store.erasure_log import ErasureLog
from memoryd.store.people_learning import learn_each
from memoryd.store.people_records import (
    Forgotten,
    Merge,
    StoredPerson,
    SummaryMaterial,
)
from memoryd.store.people_rules import check_alias_free, find_person
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres import notices
from memoryd.store.postgres.people.people import (
    announce,
    counts_about,
    delete,
    lock_owner,
    memories_about,
    merge,
    people_of,
    save,
    visible_people,
    visible_rowids,
)
from memoryd.store.postgres.people.people_learning import Learned, learn
from memoryd.store.postgres.search import annotate
from memoryd.store.postgres.store_part import StorePart
from memoryd.store.records import MemoryRecord
from memoryd.store.visibility import Scope, personal_key

Conn = psycopg.Connection[Any]


def find(conn: Conn, scope: Scope, phrase: str, now_ms: int) -> StoredPerson | None:
    """The caller's person ``phrase`` names among those ``scope`` may know of."""
    return find_person(visible_people(conn, scope, now_ms), phrase)


def _rowids(conn: Conn, memory_ids: Sequence[str]) -> dict[str, int]:
    """memory id -> rowid, for those of ``memory_ids`` that exist and are not deleted (a memory
    deleted since its add teaches no people: a forgotten person must not come back from it)."""
    rows = conn.execute(
        "SELECT id, rowid FROM memories WHERE id = ANY(%s) AND deleted_at_ms IS NULL", (list(memory_ids),)
    )
    return {memory_id: int(rowid) for memory_id, rowid in rows}


class People(StorePart):
    """``interfaces.PeopleStore`` on PostgreSQL."""

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
        now = self._clock()

        def run(conn: Conn) -> Learned:
            learned = learn_each(
                functools.partial(learn, conn),
                _rowids(conn, [memory_id]),
                [(memory_id, content, subjects)],
                owner=owner,
                owner_names=owner_names,
                now_ms=now,
                max_people=max_people,
                seen_by=seen_by,
            )
            return learned[0]

        return await self._db.run(run)

    def learn_many(
        self, owner: str, memories_of: Sequence[tuple[str, str, Sequence[str]]], owner_names: Sequence[str]
    ) -> int:
        now = self._clock()

        def run(conn: Conn) -> int:
            rowids = _rowids(conn, [m[0] for m in memories_of])
            learn_one = functools.partial(learn, conn)
            return len(learn_each(learn_one, rowids, memories_of, owner=owner, owner_names=owner_names, now_ms=now))

        return self._db.run_sync(run)

    async def people_of(self, owner: str) -> list[StoredPerson]:
        return await self._db.run(people_of, owner)

    async def erasure_mark(self) -> ErasureLog | None:
        """None: an erasure tells every daemon itself (``erased:<user>`` on memoryd_changes)."""
        return None

    async def visible_people(self, scope: Scope) -> list[StoredPerson]:
        return await self._db.run(visible_people, scope, self._clock())

    async def visible_rowids(self, scope: Scope, person_rowids: Sequence[int]) -> set[int]:
        return await self._db.run(visible_rowids, scope, list(person_rowids), self._clock())

    async def find(self, scope: Scope, phrase: str) -> StoredPerson | None:
        return await self._db.run(find, scope, phrase, self._clock())

    async def memories_about(self, scope: Scope, person: StoredPerson, *, limit: int) -> list[MemoryRecord]:
        def run(conn: Conn) -> list[MemoryRecord]:
            found = [record for _, record in memories_about(conn, scope, [person.rowid], self._clock(), limit=limit)]
            annotate(conn, scope, found)
            return found

        return await self._db.run(run)

    async def counts(self, scope: Scope, persons: Sequence[StoredPerson]) -> dict[str, int]:
        def run(conn: Conn) -> dict[str, int]:
            found = counts_about(conn, scope, [p.rowid for p in persons], self._clock())
            return {p.id: found.get(p.rowid, 0) for p in persons}

        return await self._db.run(run)

    async def merge(self, scope: Scope, source: str, target: str) -> Merge:
        now = self._clock()
        owner = scope.user_id

        def run(conn: Conn) -> Merge:
            lock_owner(conn, owner)
            a, b = find(conn, scope, source, now), find(conn, scope, target, now)
            if a is None or b is None or a.id == b.id:
                return Merge(a, b, None)
            merged = merge(conn, a, b, now)
            rows.audit(conn, personal_key(owner), b.id, "person_merged", owner, now, {"from": a.id, "into": b.id})
            announce(conn, owner)
            return Merge(a, b, merged)

        return await self._db.run(run)

    async def add_alias(self, scope: Scope, phrase: str, alias: str) -> StoredPerson | None:
        now = self._clock()
        owner = scope.user_id

        def run(conn: Conn) -> StoredPerson | None:
            lock_owner(conn, owner)
            person = find(conn, scope, phrase, now)
            if person is None:
                return None
            holder = find(conn, scope, alias, now)
            check_alias_free(person, holder, alias)
            if person.add_alias(alias):
                save(conn, person, now)
                announce(conn, owner)
            return person

        return await self._db.run(run)

    async def forget(self, scope: Scope, phrase: str, *, delete_person: bool) -> Forgotten | None:
        now = self._clock()

        def run(conn: Conn) -> Forgotten | None:
            lock_owner(conn, scope.user_id)
            person = find(conn, scope, phrase, now)
            if person is None:
                return None
            found = memories_about(conn, scope, [person.rowid], now, include_expired=True)
            rows.mark_deleted(conn, [rowid for rowid, _ in found], now)
            for rowid, record in found:
                key = conn.execute("SELECT scope_key FROM memories WHERE rowid = %s", (rowid,)).fetchone()
                rows.audit(conn, key[0] if key else "", record.id, "deleted", scope.user_id, now,
                           {"chat_id": scope.chat_id, "reason": "forget_person", "person_id": person.id})  # fmt: skip
            if delete_person:
                delete(conn, person)
            announce(conn, scope.user_id)
            for key in scope.visible_keys():
                notices.deleted(conn, key)
            rows.audit(conn, personal_key(scope.user_id), person.id, "person_forgotten", scope.user_id, now,
                       {"memories": len(found), "person_deleted": delete_person, "chat_id": scope.chat_id})  # fmt: skip
            return Forgotten(person, [record.id for _, record in found], delete_person)

        return await self._db.run(run)

    async def summary_material(self, scope: Scope, limit: int) -> SummaryMaterial:
        def run(conn: Conn) -> SummaryMaterial:
            found = rows.list_visible(
                conn,
                scope,
                limit=limit,
                offset=0,
                before_id=None,
                include_expired=False,
                about=None,
                now_ms=self._clock(),
            )
            annotate(conn, scope, found)
            return SummaryMaterial(found, visible_people(conn, scope, self._clock()))

        return await self._db.run(run)
