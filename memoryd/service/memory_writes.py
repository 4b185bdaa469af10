"""The memory.* methods that write: add, delete, forget_all, pin and unpin."""

from __future__ import annotations

import logging
from typing import Any

from memoryd.errors import InvalidParams
from memoryd.ids import DAY_MS, MIN_PREFIX_LENGTH, now_ms
from memoryd.knowledge import expiry_phrases
from memoryd.log import fields
from memoryd.rpc.dispatch import CallContext
from memoryd.service.memory_base import MemoryServiceBase, ambiguity_names, not_visible
from memoryd.service.params import AddParams, DeleteParams, ForgetAllParams
from memoryd.service.provenance import adding_scope, caller_scope, identify, owner_names, provenance_of
from memoryd.service.validation import check_group_chat, check_id_prefix, check_memory_fields, optional_text
from memoryd.store import MemoryRecord, NewMemory
from memoryd.store.supersession_records import Stored

log = logging.getLogger("memoryd.service")


class MemoryWrites(MemoryServiceBase):
    """memory.add, memory.delete, memory.forget_all, memory.pin and memory.unpin."""

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
                with ambiguity_names("supersedes"):
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

    async def delete(self, params: DeleteParams, ctx: CallContext) -> dict[str, Any]:
        scope = caller_scope(params, ctx, self.authenticator)
        with ambiguity_names("memory_id"):
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
        with ambiguity_names("memory_id"):
            record = await self.memories.pin(scope, check_id_prefix("memory_id", params.memory_id), pinned=pinned)
        if record is None:
            raise not_visible("memory_id")
        log.info("memory.pinned" if pinned else "memory.unpinned", extra=fields(id=record.id))
        return record


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for name in names:
        seen.setdefault(name.strip(), None)
    return list(seen)
