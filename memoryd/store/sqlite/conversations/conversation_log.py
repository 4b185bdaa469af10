"""``ConversationLog``: observed messages and their extraction jobs, for the observe and extract
methods and the extraction worker (SQL in ``conversations.py``, ``extraction_jobs.py`` and ``learned.py``)."""

from __future__ import annotations

import builtins
import functools
import random
from collections.abc import Callable, Sequence
from typing import Any

import apsw
import numpy.typing as npt

from memoryd.errors import ExtractedMessagesGone, ExtractionJobGone
from memoryd.store.conversation_records import (
    ErasuresSeen,
    ExtractionJob,
    LearnedFrom,
    MessagesRead,
    SessionContext,
    SessionRef,
    StoredMessage,
)
from memoryd.store.conversation_rules import in_batches
from memoryd.store.erasure_log import erased_after
from memoryd.store.records import NewMemory
from memoryd.store.sqlite.admin.erasure import erasure_mark
from memoryd.store.sqlite.conversations import conversations, extraction_jobs, learned
from memoryd.store.sqlite.conversations import episodes as episodes_store
from memoryd.store.sqlite.conversations.learned import Learned
from memoryd.store.sqlite.db.database import Database
from memoryd.store.sqlite.db.write_batch import WriteBatcher
from memoryd.store.sqlite.supersession.supersession import Plan
from memoryd.store.visibility import Scope


class ConversationLog:
    def __init__(self, db: Database, clock: Callable[[], int], small_writes: WriteBatcher) -> None:
        """``small_writes``: observed messages that arrive together (and adds) commit together."""
        self._db = db
        self._clock = clock
        self._small_writes = small_writes
        self._rng = random.Random()

    async def observe(
        self,
        session: SessionRef,
        context: SessionContext,
        messages: Sequence[StoredMessage],
        *,
        extract_after_ms: int | None,
        episodes: bool = False,
    ) -> int:
        """Store ``messages``; with ``extract_after_ms``, the session's extraction comes due that
        long after now (each call pushes it back: the debounce); with ``episodes``, each message
        is also stored as a searchable memory of type ``episode``, in the same transaction."""
        now = self._clock()
        due = None if extract_after_ms is None else now + extract_after_ms
        observe = functools.partial(
            _observe, session=session, context=context, messages=list(messages), now_ms=now, due_at_ms=due,
            episodes=episodes,
        )  # fmt: skip
        return await self._small_writes.write(observe)

    async def queued_extractions(self, session: SessionRef) -> tuple[int, bool]:
        return await self._db.read(conversations.queued_extractions, session)

    async def session_messages(self, session: SessionRef, limit: int) -> builtins.list[StoredMessage]:
        return await self._db.read(conversations.session_messages, session, limit)

    async def window(
        self, session: SessionRef, message_id: str, radius: int
    ) -> tuple[SessionRef, builtins.list[StoredMessage]] | None:
        """``memory.extract``'s messages: the one named and ``radius`` either side (see
        ``conversations.window`` for a session given without its key)."""
        return await self._db.read(conversations.window, session, message_id, radius)

    async def claim(self, limit: int, max_messages: int) -> builtins.list[ExtractionJob]:
        return await self._db.write(extraction_jobs.claim, self._clock(), limit, max_messages)

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
    ) -> builtins.list[Learned]:
        """Add or refresh the facts the caller ``scope`` learned (matching only what it may
        see); with ``completes``, advance that job's high-water mark in the same transaction
        (a crash either stores the facts and the mark, or neither).  A job erased since its
        claim (forget_all while the LLM answered) stores nothing, what it learned is gone too:
        ExtractionJobGone; so do facts whose ``read`` messages are gone, or whose user was erased
        since ``read`` (``ErasuresSeen``): ExtractedMessagesGone.  Writes are serialized, so an
        erasure either commits before this check or finds these facts and erases them too."""
        now = self._clock()

        def write(db: Any) -> builtins.list[Learned]:
            if completes is not None and not extraction_jobs.advance(db, completes, now):
                raise ExtractionJobGone()
            if isinstance(read, MessagesRead) and not conversations.messages_remain(db, read):
                raise ExtractedMessagesGone()
            if isinstance(read, ErasuresSeen) and erased_after(erasure_mark(db), read.mark, read.user_id):
                raise ExtractedMessagesGone()
            return learned.store_facts(db, news, fact_vectors, now, scope=scope, normalize=normalize, plans=plans)

        return await self._db.write(write)

    async def erasures_seen(self, user_id: str) -> ErasuresSeen:
        log = await self._db.read(erasure_mark)
        return ErasuresSeen(user_id, None if log is None else log.last)

    async def fail(self, job: ExtractionJob, error: str, *, park: bool, retry_after_ms: int = 0) -> int:
        return await self._db.write(
            extraction_jobs.fail, job, error, self._clock(), park=park, retry_after_ms=retry_after_ms, rng=self._rng
        )

    def clear_leases(self) -> None:
        """Start-up (synchronous): release what a previous run had claimed."""
        self._db.write_sync(extraction_jobs.clear_leases)

    async def next_due_ms(self) -> int | None:
        return await self._db.read(extraction_jobs.next_due_ms)

    async def status(self) -> dict[str, Any]:
        return await self._db.read(extraction_jobs.status)

    def retry_parked(self) -> dict[str, int]:
        """`memoryd jobs retry` (synchronous)."""
        return self._db.write_sync(extraction_jobs.retry_parked, self._clock())

    def schedule_backlog(self, *, retention_ms: int) -> int:
        """Messages observed while extraction was off (and kept, within ``retention_ms``) come
        due for extraction, oldest first (``extraction_jobs.schedule_backlog``)."""
        now = self._clock()
        return self._db.write_sync(extraction_jobs.schedule_backlog, now, now - retention_ms)

    def prune_episodes(self, *, retention_ms: int) -> int:
        """Maintenance (synchronous): remove episodes past their retention, in short batches."""
        cutoff = self._clock() - retention_ms
        return in_batches(lambda: self._db.write_sync(episodes_store.prune_batch, cutoff), episodes_store.PRUNE_BATCH)

    def prune(self, *, retention_ms: int) -> int:
        """Maintenance (synchronous): remove messages past retention, in short batches."""
        cutoff = self._clock() - retention_ms
        return in_batches(lambda: self._db.write_sync(conversations.prune, cutoff), conversations.PRUNE_BATCH)


def _observe(
    db: apsw.Connection,
    session: SessionRef,
    context: SessionContext,
    messages: list[StoredMessage],
    now_ms: int,
    *,
    due_at_ms: int | None,
    episodes: bool,
) -> int:
    stored = conversations.observe(db, session, context, messages, now_ms, due_at_ms=due_at_ms)
    if episodes:
        episodes_store.add(db, session, context, messages, now_ms)
    return stored
