"""The memory.* methods that read: search, list, get and history."""

from __future__ import annotations

import builtins
import dataclasses

from memoryd.rpc.dispatch import CallContext
from memoryd.service.memory_base import MemoryServiceBase, ambiguity_names, not_visible
from memoryd.service.params import MAX_QUERY_BYTES, GetParams, HistoryParams, ListParams, SearchParams
from memoryd.service.provenance import caller_scope
from memoryd.service.validation import check_id_prefix, check_text
from memoryd.store import MemoryRecord, Scope, SearchHit, relevance

#: A search with a ``types`` filter reads this many times its limit (at most MAX_SEARCH_DEPTH).
TYPE_FILTER_DEPTH = 5
MAX_SEARCH_DEPTH = 100


class MemoryReads(MemoryServiceBase):
    """memory.search, memory.list, memory.get and memory.history, within the caller's scope."""

    async def search(self, params: SearchParams, ctx: CallContext) -> list[SearchHit]:
        scope = dataclasses.replace(
            caller_scope(params, ctx, self.authenticator), include_superseded=params.include_superseded
        )
        floor = relevance.SEARCH_FLOOR if params.min_relevance is None else params.min_relevance
        if not params.types:
            return await self.search_in(scope, params.query, params.limit, about=params.about, min_relevance=floor)
        # A types filter reads deeper, then keeps the wanted types: the ranking stays the
        # store's, and the types a search returns are what it would return unfiltered (each
        # above the same relevance threshold).
        wanted = set(_type_names(params.types) or ())
        depth = min(MAX_SEARCH_DEPTH, max(params.limit * TYPE_FILTER_DEPTH, params.limit))
        hits = await self.search_in(scope, params.query, depth, about=params.about, min_relevance=floor)
        return [hit for hit in hits if hit.memory_type in wanted][: params.limit]

    async def search_in(
        self, scope: Scope, query: str, limit: int, *, about: str | None = None, min_relevance: float = 0.0
    ) -> list[SearchHit]:
        """memory.search for a caller already identified (memory.context searches too); hits
        below ``min_relevance`` are left out."""
        check_text("query", query, max_bytes=MAX_QUERY_BYTES)
        focus = None
        if self.people is not None:
            focus, query = await self.people.focus(scope, query, about)
        queries = self._query_vectors if self._vector_space_ready else None
        if queries is None:
            return await self.memories.search(
                scope, query, limit=limit, people_focus=focus, min_relevance=min_relevance
            )
        # The store reads its keyword part while the query is being embedded.
        return await self.memories.search(
            scope, query, limit=limit, vector=queries.vector(query), people_focus=focus, min_relevance=min_relevance
        )

    async def list(self, params: ListParams, ctx: CallContext) -> list[MemoryRecord]:
        scope = dataclasses.replace(
            caller_scope(params, ctx, self.authenticator), include_superseded=params.include_superseded
        )
        before_id = None
        if params.before_id is not None:
            before_id = check_id_prefix("before_id", check_text("before_id", params.before_id, max_bytes=64))
        about = None
        if params.about is not None and self.people is not None:
            focus, _ = await self.people.focus(scope, "", params.about)
            about = focus.only if focus is not None else None
        with ambiguity_names("before_id"):
            return await self.memories.list(
                scope,
                limit=params.limit,
                offset=params.offset,
                before_id=before_id,
                include_expired=params.include_expired,
                about=about,
                types=_type_names(params.types),
            )

    async def get(self, params: GetParams, ctx: CallContext) -> MemoryRecord:
        scope = caller_scope(params, ctx, self.authenticator)
        with ambiguity_names("memory_id"):
            record = await self.memories.get(scope, check_id_prefix("memory_id", params.memory_id))
        if record is None:
            raise not_visible("memory_id")
        return record

    async def history(self, params: HistoryParams, ctx: CallContext) -> builtins.list[MemoryRecord]:
        """The versions of a memory (what it replaced and what replaced it), oldest first."""
        scope = caller_scope(params, ctx, self.authenticator)
        chain = None
        if self.supersession is not None:
            with ambiguity_names("memory_id"):
                chain = await self.supersession.history(scope, check_id_prefix("memory_id", params.memory_id))
        if chain is None:
            raise not_visible("memory_id")
        return chain


def _type_names(types: builtins.list[str] | None) -> builtins.list[str] | None:
    """search and list's ``types``, as text every engine can look up (no NUL: -32602 naming it)."""
    return (
        None if types is None else [check_text(f"types[{i}]", name, allow_blank=True) for i, name in enumerate(types)]
    )
