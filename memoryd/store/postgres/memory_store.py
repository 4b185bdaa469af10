"""``interfaces.MemoryStore`` on PostgreSQL: the memory.* methods and system.health."""

from __future__ import annotations

import builtins
import functools
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
import trio

from memoryd.store import query_adapter
from memoryd.store.people_records import PeopleFocus
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres import search as searching
from memoryd.store.postgres.store_part import StorePart
from memoryd.store.query_vector import QueryVector
from memoryd.store.records import MemoryRecord, NewMemory, SearchHit
from memoryd.store.storage_state import Condition
from memoryd.store.visibility import Scope

log = logging.getLogger("memoryd.store")
Conn = psycopg.Connection[Any]


class Memories(StorePart):
    """``interfaces.MemoryStore`` on PostgreSQL."""

    async def add(self, new: NewMemory) -> tuple[MemoryRecord, bool]:
        added = await self._db.run(self._store.locked_add, new, self._clock(), pipeline=True)
        return added.record, added.duplicate

    def add_many(self, news: Iterable[NewMemory]) -> int:
        count = self._db.run_sync(rows.insert_many, list(news), self._clock())
        self._db.run_sync(job_rows.notify)
        return count

    async def list(
        self,
        scope: Scope,
        *,
        limit: int,
        offset: int = 0,
        before_id: str | None = None,
        include_expired: bool = False,
        about: Sequence[int] | None = None,
        types: Sequence[str] | None = None,
    ) -> builtins.list[MemoryRecord]:
        now = self._clock()

        def page(conn: Conn) -> builtins.list[MemoryRecord]:
            found = rows.list_visible(
                conn,
                scope,
                limit=limit,
                offset=offset,
                before_id=before_id,
                include_expired=include_expired,
                about=about,
                now_ms=now,
                types=None if about is not None else types,
            )
            searching.annotate(conn, scope, found)
            return found

        records = await self._db.run(page)
        self._store.hits.note((record.id for record in records), now)
        return records

    async def search(
        self,
        scope: Scope,
        query: str,
        *,
        limit: int,
        vector: QueryVector | None = None,
        people_focus: PeopleFocus | None = None,
        min_relevance: float = 0.0,
    ) -> builtins.list[SearchHit]:
        space = self._store.space
        unit: npt.NDArray[np.float32] | None = None
        if vector is not None and space is not None:
            raw = vector.known if vector.known is not None else await vector.wait()
            if raw is not None:
                array = np.asarray(raw, dtype=np.float32).reshape(-1)
                norm = float(np.linalg.norm(array))
                if array.size == space.dim and norm > 0 and np.isfinite(norm):
                    unit = array / norm
                else:
                    log.warning(
                        "search: query vector has %d dimensions, the store %d; keyword results only",
                        array.size,
                        space.dim,
                    )
        now = self._clock()
        generation = space.generation if space is not None and unit is not None else None
        adapted = query_adapter.adapted(unit, space.model) if space is not None and unit is not None else None

        def run(conn: Conn) -> builtins.list[SearchHit]:
            return searching.search(
                conn, scope, query, limit, unit, generation, people_focus, now, min_relevance,
                self._store.scope_stats, adapted,
            )  # fmt: skip

        hits = await self._db.run(run, own_transaction=True)
        self._store.hits.note((hit.id for hit in hits), now)
        return hits

    async def get(self, scope: Scope, prefix: str) -> MemoryRecord | None:
        now = self._clock()

        def one(conn: Conn) -> MemoryRecord | None:
            found = rows.get(conn, scope, prefix, now)
            if found is None:
                return None
            searching.annotate(conn, scope, [found[1]])
            self._store.hits.note([found[1].id], now)
            return found[1]

        return await self._db.run(one)

    async def delete(self, scope: Scope, prefix: str) -> str | None:
        return await self._db.run(rows.delete, scope, prefix, self._clock())

    async def pin(self, scope: Scope, prefix: str, *, pinned: bool) -> MemoryRecord | None:
        return await self._db.run(functools.partial(rows.pin, pinned=pinned), scope, prefix, self._clock())

    async def erase_user(
        self, user_id: str, *, actor: str, include_group: bool, usernames: Sequence[str]
    ) -> dict[str, int]:
        return await trio.to_thread.run_sync(
            functools.partial(
                self._store.maintenance.erase_user,
                user_id,
                actor=actor,
                include_group=include_group,
                usernames=usernames,
            )
        )

    async def short_ids(self, scope: Scope, ids: Iterable[str]) -> dict[str, str]:
        return await self._db.run(rows.short_ids, scope, builtins.list(ids), self._clock())

    @property
    def storage(self) -> Condition:
        condition: Condition = self._store.condition
        return condition

    @property
    def write_count(self) -> int:
        count: int = self._store.write_count
        return count

    async def health_counts(self) -> dict[str, Any]:
        return await self._db.run(rows.health_counts, self._clock())
