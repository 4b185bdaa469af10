"""``MemoryRepository``: what the memory.* methods and system.health need from the store.

Each coroutine hands one small synchronous function (``memories``, ``lookup``, ``search``,
``stats``) to the writer or to a reader in a worker thread; nothing blocks the trio event
loop.  Input arrives validated (``memoryd.service``); visibility is ``visibility.py``'s.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import apsw
import trio

from memoryd.store.query_vector import QueryVector
from memoryd.store.records import MemoryRecord, NewMemory, SearchHit
from memoryd.store.sqlite.admin import stats
from memoryd.store.sqlite.db.condition import Condition
from memoryd.store.sqlite.db.database import Database
from memoryd.store.sqlite.memories import lookup, memories
from memoryd.store.sqlite.memories.hits import HitCounter
from memoryd.store.sqlite.people import people
from memoryd.store.sqlite.search import overlapped_search, people_retriever, search_parts
from memoryd.store.sqlite.search.overlap_gate import OverlapGate
from memoryd.store.sqlite.search.overlapped_search import StartEmbedding, VectorUnderWay
from memoryd.store.sqlite.search.people_retriever import PeopleFocus
from memoryd.store.sqlite.vectors.vectors import VectorSpace
from memoryd.store.visibility import Scope


class MemoryRepository:
    """Memories as callers see them: add, list, get, delete, search, short ids; health numbers."""

    def __init__(
        self,
        db: Database,
        hits: HitCounter,
        clock: Callable[[], int],
        space: Callable[[], VectorSpace | None],
        overlap: OverlapGate,
    ) -> None:
        """``space`` gives the vector space this process configured (query vectors come from its
        embedder); while it gives None, search is keyword-only.  ``overlap``: which scopes'
        searches overlap their parts."""
        self._db = db
        self._overlap = overlap
        self._hits = hits
        self._clock = clock
        self._space = space

    async def add(self, new: NewMemory) -> tuple[MemoryRecord, bool]:
        """Insert ``new``; an identical live memory in the same scope is returned instead
        (second value True)."""
        return await self._db.write(memories.add, new, self._clock())

    def add_many(self, news: Iterable[NewMemory]) -> int:
        """Bulk load in one transaction, without dedupe (benchmarks, tests); same rows, audit and
        embed jobs as ``add``.  Synchronous: not for the event loop."""
        return self._db.write_sync(memories.insert_many, news, self._clock())

    async def list(
        self,
        scope: Scope,
        *,
        limit: int,
        offset: int = 0,
        before_id: str | None = None,
        include_expired: bool = False,
        about: Sequence[int] | None = None,
    ) -> builtins.list[MemoryRecord]:
        """The caller's memories, newest first; ``before_id`` (a normalised id or prefix)
        continues after a page; ``about`` (person rowids) keeps the memories about them."""
        records = await self._db.read(
            _list_annotated,
            scope,
            about,
            limit=limit,
            offset=offset,
            before_id=before_id,
            include_expired=include_expired,
            now_ms=self._clock(),
        )
        self._hits.note((record.id for record in records), self._clock())
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
        """Hybrid keyword + vector search within the caller's scope, best first.

        ``vector`` must come from the embedder of the configured vector space; before one was
        configured (or with a vector of the wrong length) the search is keyword-only.  A vector
        still under way is awaited while the keyword part runs (``overlapped_search.py``); one
        started at once on the embedder's own thread is waited for in the reader's thread.
        ``people_focus``: the people the query mentions or an ``about`` filter names.
        ``min_relevance``: hits below this relevance (store/relevance.py) are left out.
        """
        known = embed_query = start_embedding = None
        if vector is not None:
            known = vector.known
            if known is None:
                embed_query, start_embedding = vector.wait, _start_in_worker_thread(vector)
        hits = await overlapped_search.run(
            self._db,
            scope,
            search_parts.SearchQuery(query, limit, known, self._space(), self._clock(), min_relevance),
            people_focus,
            embed_query,
            self._overlap,
            start_embedding,
        )
        self._hits.note((hit.id for hit in hits), self._clock())
        return hits

    async def get(self, scope: Scope, prefix: str) -> MemoryRecord | None:
        """One visible, unexpired memory by full id or unique prefix (normalised), or None;
        AmbiguousIdPrefix when the prefix matches several."""
        record = await self._db.read(_get_annotated, scope, prefix, self._clock())
        if record is not None:
            self._hits.note([record.id], self._clock())
        return record

    async def delete(self, scope: Scope, prefix: str) -> str | None:
        """Soft-delete by full id or unique prefix among the caller's visible memories."""
        return await self._db.write(lookup.delete, scope, prefix, self._clock())

    async def short_ids(self, scope: Scope, ids: Iterable[str]) -> dict[str, str]:
        """The shortest prefix (at least 8 characters) naming each id among what ``scope`` sees."""
        return await self._db.read(lookup.short_ids, scope, builtins.list(ids), self._clock())

    @property
    def storage(self) -> Condition:
        """Whether the store takes writes (ok, disk full, file damaged), and why not."""
        return self._db.condition.current

    @property
    def write_count(self) -> int:
        """How many write transactions this process has run (a cheap change stamp)."""
        return self._db.write_count

    async def health_counts(self) -> dict[str, Any]:
        """Active, expired and deleted memories, users, and the file size."""
        counts: dict[str, Any] = await self._db.read(stats.health_counts, self._clock())
        counts["db_bytes"] = self._db.file_bytes()
        return counts


def _start_in_worker_thread(vector: QueryVector) -> StartEmbedding:
    """The query started at once, waited for in a trio worker thread (the reader's), where a
    cancelled search raises trio.Cancelled."""

    def start() -> VectorUnderWay | None:
        under_way = vector.start_now()
        return None if under_way is None else functools.partial(under_way, trio.from_thread.check_cancelled)

    return start


def _list_annotated(
    db: apsw.Connection, scope: Scope, about: Sequence[int] | None, **page: Any
) -> builtins.list[MemoryRecord]:
    if about is None:
        records = memories.list_visible(db, scope, **page)
    else:
        limit, now_ms = page.pop("limit"), page.pop("now_ms")
        records = [record for _, record in people.memories_about(db, scope, about, now_ms, limit=limit, **page)]
    people_retriever.annotate(db, scope, records)
    return records


def _get_annotated(db: apsw.Connection, scope: Scope, prefix: str, now_ms: int) -> MemoryRecord | None:
    record = lookup.get_visible(db, scope, prefix, now_ms)
    if record is not None:
        people_retriever.annotate(db, scope, [record])
    return record
