"""From extracted facts to memories: scope, provenance, expiry, and the near-duplicate check.

Used by the extraction worker and by the extract methods alike, so a fact is stored the same
way whichever path found it.  The facts are embedded first (when an embedder is up) so the
store can compare them with the scope's vectors; without vectors the store compares
normalized text.  New memories get their embedding job like any ``memory.add``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy.typing as npt
import trio

from memoryd.embed import Embedder
from memoryd.errors import EmbedderError
from memoryd.extract import ConversationMessage, Fact, Speaker, normalized_text
from memoryd.ids import DAY_MS, now_ms
from memoryd.knowledge import expiry_phrases
from memoryd.log import fields
from memoryd.service.backfill import EmbeddingBackfill
from memoryd.service.memory import AddedListener
from memoryd.service.provenance import owner_names
from memoryd.service.supersession import Supersession
from memoryd.store import (
    ConversationStore,
    ExtractionJob,
    Learned,
    MemoryRecord,
    NewMemory,
    Provenance,
    Scope,
    StoredMessage,
)
from memoryd.store.conversation_records import LearnedFrom

log = logging.getLogger("memoryd.extraction")

#: ``source`` of every memory extraction stores.
EXTRACTION_SOURCE = "extraction"
#: Chat types in which a fact about the group becomes a group memory (never a private chat).
GROUP_CHAT_TYPES = frozenset({"group", "supergroup", "channel"})


@dataclass(frozen=True)
class Origin:
    """Where a batch of facts comes from: the provenance every fact of it carries."""

    speaker: Speaker
    chat_type: str | None = None
    session_key: str | None = None
    #: The newest message id of the batch (a fact cannot be traced to one message).
    message_id: str | None = None
    #: Display names of the people who wrote messages, by username (without "@").
    authors: dict[str, str] = field(default_factory=dict)
    #: Store every fact as a group memory of the chat (``extract_from_messages``' ``shared``).
    all_shared: bool = False
    #: The caller's IANA timezone: "until Friday" in a fact ends on the caller's Friday.
    timezone: str | None = None


def origin_of(
    messages: Sequence[ConversationMessage],
    speaker: Speaker,
    *,
    chat_type: str | None,
    session_key: str | None,
    message_id: str | None = None,
    all_shared: bool = False,
) -> Origin:
    authors = {
        message.username.lstrip("@"): message.display_name
        for message in messages
        if message.username and message.display_name
    }
    newest = next((message.id for message in reversed(messages) if message.id), None)
    return Origin(speaker, chat_type, session_key, message_id or newest, authors, all_shared)


def conversation_of(messages: Sequence[StoredMessage]) -> list[ConversationMessage]:
    """Stored messages as the extractor reads them."""
    return [
        ConversationMessage(
            role="user" if m.role == "user" else "assistant",
            content=m.content,
            id=m.message_id,
            timestamp=_timestamp(m.sent_at),
            username=m.username,
            display_name=m.display_name,
            user_id=m.user_id,
        )
        for m in messages
    ]


def _timestamp(value: str | float | None) -> datetime | float | None:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return value


class FactLearner:
    def __init__(
        self,
        conversations: ConversationStore,
        embedder: Embedder | None,
        backfill: EmbeddingBackfill | None,
        *,
        embed_timeout: float,
        on_added: Sequence[AddedListener] = (),
        supersession: Supersession | None = None,
    ) -> None:
        """``on_added``: told of each new memory as if it had come through ``memory.add``
        (people learning, then the memory service's listeners: summaries)."""
        self.on_added = on_added
        #: Extracted facts supersede older memories as ``memory.add``'s do.
        self.supersession = supersession
        self.conversations = conversations
        self.embedder = embedder
        self.backfill = backfill
        self.embed_timeout = embed_timeout
        self.stored_total = 0
        self.refreshed_total = 0
        self.embedding_seconds = 0.0

    async def learn(
        self,
        facts: Sequence[Fact],
        scope: Scope,
        origin: Origin,
        *,
        completes: ExtractionJob | None = None,
        read: LearnedFrom | None = None,
    ) -> list[Learned]:
        """Store or refresh ``facts`` in ``scope``; with ``completes``, that job's mark moves past
        its messages in the same transaction (also when there are no facts); with ``read``,
        nothing is stored once one of those messages is gone, or its user was erased since
        (ExtractedMessagesGone)."""
        at = now_ms()
        news = [self._new_memory(fact, scope, origin, at) for fact in facts]
        fact_vectors = await self._vectors([new.content for new in news])
        plans = None
        if self.supersession is not None:
            plans = [await self.supersession.plan(new, scope) for new in news]
        learned = await self.conversations.store_facts(
            news, fact_vectors, scope=scope, normalize=normalized_text, completes=completes, plans=plans, read=read
        )
        deferred = plans is not None and any(plan.defer for plan in plans)
        if self.supersession is not None and deferred and any(not item.refreshed for item in learned):
            self.supersession.queued()
        for item, new in zip(learned, news, strict=True):
            if item.record is not None:
                await self._tell_listeners(scope, item.record, new)
        stored = sum(not item.refreshed for item in learned)
        self.stored_total += stored
        self.refreshed_total += len(learned) - stored
        if stored and self.backfill is not None:
            self.backfill.notify()
        return learned

    async def _tell_listeners(self, scope: Scope, record: MemoryRecord, new: NewMemory) -> None:
        provenance = new.provenance or Provenance()
        names = owner_names(scope, provenance.source_username, provenance.source_display_name)
        for listener in self.on_added:
            try:
                await listener(scope, record, names)
            except Exception:
                # The memory is stored; what a listener derives from it must not fail the batch.
                log.exception("extraction.listener_failed")

    def _new_memory(self, fact: Fact, scope: Scope, origin: Origin, at_ms: int) -> NewMemory:
        shared = (fact.shared or origin.all_shared) and scope.chat_id is not None
        if origin.chat_type is not None and origin.chat_type not in GROUP_CHAT_TYPES and not origin.all_shared:
            shared = False
        username = fact.speaker or (origin.speaker.username or "").lstrip("@") or None
        display = origin.authors.get(username or "")
        if display is None and username == (origin.speaker.username or "").lstrip("@"):
            display = origin.speaker.display_name
        return NewMemory(
            content=fact.content,
            owner=scope.user_id,
            chat_id=scope.chat_id,
            shared=shared,
            source=EXTRACTION_SOURCE,
            subjects=list(fact.subjects),
            expires_at_ms=_expires_at_ms(fact, at_ms, origin.timezone),
            metadata={"aliases": fact.aliases} if fact.aliases else {},
            confidence=fact.confidence,
            provenance=Provenance(
                chat_type=origin.chat_type,
                source_username=username,
                source_display_name=display,
                source_message_id=origin.message_id,
                source_session=origin.session_key,
                sensitivity=fact.sensitivity,
                memory_type=fact.memory_type,
            ),
        )

    async def _vectors(self, texts: list[str]) -> list[npt.ArrayLike | None]:
        """The facts' vectors for the near-duplicate check, or Nones (never fails, never waits
        past ``embed_timeout``: a down embedder only costs the check its vectors)."""
        ready = self.backfill is not None and self.backfill.vector_space_ready and self.backfill.last_error is None
        if not texts or self.embedder is None or not ready:
            return [None] * len(texts)
        started = trio.current_time()
        try:
            with trio.fail_after(self.embed_timeout):
                return list(await self.embedder.embed(texts))
        except (EmbedderError, trio.TooSlowError) as exc:
            log.warning("extraction.embed_skipped", extra=fields(reason=type(exc).__name__))
            return [None] * len(texts)
        finally:
            self.embedding_seconds += trio.current_time() - started

    def describe(self) -> dict[str, Any]:
        return {
            "memories_stored_since_start": self.stored_total,
            "memories_refreshed_since_start": self.refreshed_total,
            # The facts' embeddings for the duplicate check (bench/bench_extraction.py splits it out).
            # In microseconds, rounded as integers: round(x, 6) costs ~0.4 us, and system.health
            # describes this on every call.
            "fact_embedding_seconds_since_start": round(self.embedding_seconds * 1e6) / 1e6,
        }


def _expires_at_ms(fact: Fact, at_ms: int, timezone: str | None) -> int | None:
    """What the fact's own words say ("for the next 3 days"), else ``expires_days`` (the
    model's, or its type's default lifetime): the parser answers only when the words are plain."""
    worded = expiry_phrases.expires_at_ms(fact.content, at_ms, timezone)
    if worded is not None:
        return worded
    return None if fact.expires_days is None else at_ms + fact.expires_days * DAY_MS
