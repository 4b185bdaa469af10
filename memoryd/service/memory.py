"""The memory.* methods: validate beyond types, resolve the caller's scope, call the store."""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from memoryd.auth import Authenticator
from memoryd.embed import Embedder
from memoryd.errors import AmbiguousIdPrefix, InvalidParams, NotFound
from memoryd.ids import DAY_MS, MIN_PREFIX_LENGTH, now_ms
from memoryd.knowledge import expiry_phrases
from memoryd.log import fields
from memoryd.rpc.dispatch import CallContext
from memoryd.service.backfill import EmbeddingBackfill
from memoryd.service.params import (
    DEFAULT_MAX_SUBJECTS,
    MAX_QUERY_BYTES,
    AddParams,
    DeleteParams,
    ForgetAllParams,
    GetParams,
    HistoryParams,
    ListParams,
    SearchParams,
)
from memoryd.service.people import PeopleService
from memoryd.service.provenance import adding_scope, caller_scope, identify, owner_names, provenance_of
from memoryd.service.query_vectors import QueryVectors
from memoryd.service.secret_guard import SecretsGuard
from memoryd.service.supersession import Supersession
from memoryd.service.validation import (
    check_group_chat,
    check_id_prefix,
    check_memory_fields,
    check_text,
    optional_text,
)
from memoryd.store import MemoryRecord, MemoryStore, NewMemory, Scope, SearchHit, relevance
from memoryd.store.supersession_records import NOT_VISIBLE, Stored

log = logging.getLogger("memoryd.service")

#: A search with a ``types`` filter reads this many times its limit (at most MAX_SEARCH_DEPTH).
TYPE_FILTER_DEPTH = 5
MAX_SEARCH_DEPTH = 100

#: Told about every stored memory (people learning, summary freshness): the caller, the record,
#: and the names its owner goes by (``owner_names``).
AddedListener = Callable[[Scope, MemoryRecord, tuple[str, ...]], Awaitable[None]]
#: Told that memories the caller sees were deleted (summary freshness).
DeletedListener = Callable[[Scope], None]


class MemoryService:
    def __init__(
        self,
        memories: MemoryStore,
        embedder: Embedder | None,
        backfill: EmbeddingBackfill | None,
        *,
        add_wait: float,
        query_timeout: float,
        authenticator: Authenticator | None = None,
        people: PeopleService | None = None,
        supersession: Supersession | None = None,
        secrets: SecretsGuard | None = None,
        max_subjects: int = DEFAULT_MAX_SUBJECTS,
    ) -> None:
        self.max_subjects = max_subjects
        self.authenticator = authenticator or Authenticator("trust")
        self.secrets = secrets or SecretsGuard("refuse")
        self.people = people
        self.supersession = supersession
        #: Told after each add (memory.add learns people itself, in the add's transaction).
        self.on_added: list[AddedListener] = []
        self.on_deleted: list[DeletedListener] = []
        #: Told the id of a user whose data was erased (caches holding their data drop it).
        self.on_erased: list[Callable[[str], None]] = []
        #: Called after an erasure that deleted group memories (``include_group``).
        self.on_group_erased: list[Callable[[], None]] = []
        self.memories = memories
        self.embedder = embedder
        self._query_vectors = None if embedder is None else QueryVectors(embedder, query_timeout)
        self.backfill = backfill
        self.add_wait = add_wait

    async def add(self, params: AddParams, ctx: CallContext) -> dict[str, Any]:
        caller = identify(params, ctx, self.authenticator)
        scope = adding_scope(caller, params)
        metadata = params.metadata or {}
        check_memory_fields(
            content=params.content,
            source=params.source,
            subjects=params.subjects,
            metadata=metadata,
            key=params.key,
            max_subjects=self.max_subjects,
        )
        check_group_chat(params.shared, scope.chat_id)
        if params.conversation_private and scope.chat_id is None:
            # Private to the conversation it was learned in: without a chat there is none, and
            # no caller could ever read, list or delete it.
            raise InvalidParams.for_field("conversation_private", "needs a chat_id (the conversation it is private to)")
        expires_at_ms: int | None
        if params.expires_days is not None:
            expires_at_ms = now_ms() + int(params.expires_days * DAY_MS)
        else:
            # "for 2 weeks", "until Friday": the words say when it stops being true.
            expires_at_ms = expiry_phrases.expires_at_ms(params.content, now_ms(), optional_text(params.timezone))
        # Last of the checks: a refused secret is reported only once the rest of the call is valid.
        secrets = self.secrets
        content = secrets.screen_add("content", params.content.strip())
        source = secrets.screen_add("source", params.source)
        subjects = [secrets.screen_add(f"subjects[{i}]", subject) for i, subject in enumerate(_unique(params.subjects))]
        key = None if params.key is None else secrets.screen_add("key", params.key)
        metadata = secrets.screen_metadata("metadata", metadata)
        new = NewMemory(
            content=content,
            owner=scope.user_id,
            chat_id=scope.chat_id,
            shared=params.shared,
            source=source,
            subjects=subjects,
            expires_at_ms=expires_at_ms,
            metadata=metadata,
            provenance=provenance_of(caller, params),
        )
        superseded: list[str] = []
        short_id: str | None = None
        embedded = False
        # The names the owner spoke under, from the resolved identity like the provenance (a
        # token's claims; ash's loose ``username`` only where params are believed).
        routing = caller.routing
        names = owner_names(
            scope, routing.source_username, routing.source_display_name, None if caller.verified else params.username
        )
        if self.people is not None:
            await self.people.check_room(scope, subjects, names)
        supersession = self.supersession
        if supersession is None:
            record, deduplicated = await self.memories.add(new)
            if self.people is not None:
                await self.people.learn(scope, record, names)
            if self.backfill is not None:
                self.backfill.notify()
        else:
            supersedes = None if params.supersedes is None else check_id_prefix("supersedes", params.supersedes)

            # One write transaction: the insert, supersession, the people it names, the short id.
            async def store(embeds_itself: bool) -> Stored:
                with _ambiguity_names("supersedes"):
                    return await supersession.store(
                        scope,
                        new,
                        supersedes=supersedes,
                        key=key,
                        owner_names=names if self.people is not None else None,
                        max_people=self.people.max_people if self.people is not None else None,
                        embeds_itself=embeds_itself,
                    )

            if self.backfill is None:
                stored = await store(False)
            else:
                # Idle embedder: the text is embedded alongside the insert and the reply says
                # embedded: true.  Busy: the backfill batches it; the vector follows shortly.
                stored, embedded = await self.backfill.store_and_embed(new.content, store, self.add_wait)
            record, deduplicated, superseded = stored.record, stored.deduplicated, stored.superseded
            short_id = stored.short_id
            if self.people is not None:
                self.people.learned(scope, changed=stored.people_changed, count=stored.people_count)
        for listener in self.on_added:
            await listener(scope, record, names)
        if short_id is None:
            short_id = (await self.memories.short_ids(scope, [record.id])).get(record.id, record.id[:MIN_PREFIX_LENGTH])
        log.info("memory.added", extra=fields(id=record.id, scope=record.scope, dedup=deduplicated))
        return {
            "id": record.id,
            "short_id": short_id,
            "created_at": record.created_at,
            "expires_at": record.expires_at,
            "scope": record.scope,
            "sensitivity": record.sensitivity,
            "deduplicated": deduplicated,
            "embedded": embedded,
            "superseded": superseded,
        }

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
        with _ambiguity_names("before_id"):
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
        with _ambiguity_names("memory_id"):
            record = await self.memories.get(scope, check_id_prefix("memory_id", params.memory_id))
        if record is None:
            raise _not_visible("memory_id")
        return record

    async def history(self, params: HistoryParams, ctx: CallContext) -> builtins.list[MemoryRecord]:
        """The versions of a memory (what it replaced and what replaced it), oldest first."""
        scope = caller_scope(params, ctx, self.authenticator)
        chain = None
        if self.supersession is not None:
            with _ambiguity_names("memory_id"):
                chain = await self.supersession.history(scope, check_id_prefix("memory_id", params.memory_id))
        if chain is None:
            raise _not_visible("memory_id")
        return chain

    async def delete(self, params: DeleteParams, ctx: CallContext) -> dict[str, Any]:
        scope = caller_scope(params, ctx, self.authenticator)
        with _ambiguity_names("memory_id"):
            deleted_id = await self.memories.delete(scope, check_id_prefix("memory_id", params.memory_id))
        if deleted_id is not None:
            log.info("memory.deleted", extra=fields(id=deleted_id))
            for listener in self.on_deleted:
                listener(scope)
        return {"deleted": deleted_id is not None, "id": deleted_id}

    async def forget_all(self, params: ForgetAllParams, ctx: CallContext) -> dict[str, Any]:
        """memory.forget_all: erase everything the store holds about the caller, at once."""
        scope = caller_scope(params, ctx, self.authenticator)
        if not params.confirm:
            raise InvalidParams.for_field("confirm", "must be true: erasing all your data cannot be undone")
        usernames = [name for name in (optional_text(params.source_username), optional_text(params.username)) if name]
        counts = await self.memories.erase_user(
            scope.user_id, actor=scope.user_id, include_group=params.include_group, usernames=usernames
        )
        log.info("memory.forgot_all", extra=fields(**counts))
        for listener in self.on_erased:
            listener(scope.user_id)
        if counts.get("group_memories_deleted"):
            for dropped in self.on_group_erased:
                dropped()
        return {"erased": counts, "include_group": params.include_group}

    async def pin(self, params: DeleteParams, ctx: CallContext) -> MemoryRecord:
        """memory.pin: keep a memory for good (never evicted, expired or decayed)."""
        return await self._pin(params, ctx, pinned=True)

    async def unpin(self, params: DeleteParams, ctx: CallContext) -> MemoryRecord:
        """memory.unpin: the memory is evictable again (its cleared expiry stays cleared)."""
        return await self._pin(params, ctx, pinned=False)

    async def _pin(self, params: DeleteParams, ctx: CallContext, *, pinned: bool) -> MemoryRecord:
        scope = caller_scope(params, ctx, self.authenticator)
        with _ambiguity_names("memory_id"):
            record = await self.memories.pin(scope, check_id_prefix("memory_id", params.memory_id), pinned=pinned)
        if record is None:
            raise _not_visible("memory_id")
        log.info("memory.pinned" if pinned else "memory.unpinned", extra=fields(id=record.id))
        return record

    @property
    def _vector_space_ready(self) -> bool:
        return self.backfill is not None and self.backfill.vector_space_ready


@contextlib.contextmanager
def _ambiguity_names(field: str) -> Iterator[None]:
    """An id prefix that matched several memories is the caller's input problem: -32602."""
    try:
        yield
    except AmbiguousIdPrefix as exc:
        raise InvalidParams.for_field(field, str(exc)) from None


def _not_visible(field: str) -> NotFound:
    """Nothing the caller can see has that id: the same answer whether it exists elsewhere or not."""
    return NotFound("No memory visible to you matches that id", {"field": field, "reason": NOT_VISIBLE})


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for name in names:
        seen.setdefault(name.strip(), None)
    return list(seen)


def _type_names(types: builtins.list[str] | None) -> builtins.list[str] | None:
    """search and list's ``types``, as text every engine can look up (no NUL: -32602 naming it)."""
    return (
        None if types is None else [check_text(f"types[{i}]", name, allow_blank=True) for i, name in enumerate(types)]
    )
