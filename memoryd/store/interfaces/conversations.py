"""``ConversationStore``: observed messages, their extraction jobs, and the facts stored from them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy.typing as npt

from memoryd.store.conversation_records import (
    ErasuresSeen,
    ExtractionJob,
    Learned,
    LearnedFrom,
    SessionContext,
    SessionRef,
    StoredMessage,
)
from memoryd.store.records import NewMemory
from memoryd.store.supersession_records import Plan
from memoryd.store.visibility import Scope


class ConversationStore(Protocol):
    async def observe(
        self,
        session: SessionRef,
        context: SessionContext,
        messages: Sequence[StoredMessage],
        *,
        extract_after_ms: int | None,
        episodes: bool = False,
    ) -> int:
        """Store ``messages`` (how many); with ``extract_after_ms`` the session's extraction comes
        due that long after now (each call pushes it back: the debounce); with ``episodes`` each
        message is also kept as a searchable memory of type ``episode``, in the same write."""
        ...

    async def queued_extractions(self, session: SessionRef) -> tuple[int, bool]:
        """(how many of the session owner's sessions wait for extraction, whether ``session``
        is one of them)."""
        ...

    async def session_messages(self, session: SessionRef, limit: int) -> list[StoredMessage]: ...

    async def window(
        self, session: SessionRef, message_id: str, radius: int
    ) -> tuple[SessionRef, list[StoredMessage]] | None: ...

    async def claim(self, limit: int, max_messages: int) -> list[ExtractionJob]:
        """Lease due extraction jobs, each with the messages past its high-water mark."""
        ...

    async def store_facts(
        self,
        news: Sequence[NewMemory],
        fact_vectors: Sequence[npt.ArrayLike | None],
        *,
        scope: Scope,
        normalize: Callable[[str], str],
        completes: ExtractionJob | None = None,
        plans: Sequence[Plan] | None = None,
        read: LearnedFrom | None = None,
    ) -> list[Learned]:
        """Add or refresh the facts the caller ``scope`` learned (a fact refreshes only a memory
        ``scope`` may see); with ``completes``, advance that job's high-water mark in the
        same transaction (both or neither).  ExtractionJobGone when that job is no longer this
        daemon's (erased since the claim, or claimed by another daemon): nothing is stored.
        ExtractedMessagesGone when a message of ``read`` (what the facts were extracted from)
        is no longer stored, or (``ErasuresSeen``) when its user was erased since, checked in
        the same transaction: nothing is stored."""
        ...

    async def erasures_seen(self, user_id: str) -> ErasuresSeen:
        """The store's newest erasure now, for ``store_facts(read=...)`` of facts extracted
        from messages that are not stored (``memory.extract_from_messages``)."""
        ...

    async def fail(self, job: ExtractionJob, error: str, *, park: bool, retry_after_ms: int = 0) -> int: ...

    def clear_leases(self) -> None:
        """Start-up: release what a previous run of this daemon had claimed."""
        ...

    async def next_due_ms(self) -> int | None: ...

    async def status(self) -> dict[str, Any]: ...

    def retry_parked(self) -> dict[str, int]: ...

    def schedule_backlog(self, *, retention_ms: int) -> int:
        """Start-up of extraction: sessions holding messages never extracted (observed while
        extraction was off, within ``retention_ms``) come due, oldest first; how many."""
        ...

    def prune_episodes(self, *, retention_ms: int) -> int:
        """Remove episodes older than ``retention_ms`` (pinned ones stay); how many."""
        ...

    def prune(self, *, retention_ms: int) -> int:
        """Remove observed messages older than ``retention_ms``; how many."""
        ...
