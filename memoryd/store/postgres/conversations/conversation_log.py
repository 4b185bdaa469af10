"""``Conversations``: ``interfaces.ConversationStore`` on PostgreSQL (SQL in ``conversations.py``,
``extraction_jobs.py``, ``learned.py`` and ``episodes.py``)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

import numpy.typing as npt
import psycopg

from memoryd.store.conversation_records import (
    ErasuresSeen,
    ExtractionJob,
    Learned,
    LearnedFrom,
    SessionContext,
    SessionRef,
    StoredMessage,
)
from memoryd.store.conversation_rules import in_batches
from memoryd.store.postgres.conversations import episodes as episodes_store
from memoryd.store.postgres.conversations.conversations import (
    PRUNE_BATCH,
    observe,
    prune,
    queued_extractions,
    session_messages,
    window,
)
from memoryd.store.postgres.conversations.extraction_jobs import (
    claim,
    fail,
    next_due_ms,
    retry_parked,
    schedule_backlog,
    status,
)
from memoryd.store.postgres.conversations.learned import store_facts
from memoryd.store.postgres.erasure import erasure_mark
from memoryd.store.postgres.store_part import StorePart
from memoryd.store.records import NewMemory
from memoryd.store.supersession_records import Plan
from memoryd.store.visibility import Scope

Conn = psycopg.Connection[Any]


class Conversations(StorePart):
    """``interfaces.ConversationStore`` on PostgreSQL."""

    async def observe(
        self,
        session: SessionRef,
        context: SessionContext,
        messages: Sequence[StoredMessage],
        *,
        extract_after_ms: int | None,
        episodes: bool = False,
    ) -> int:
        now = self._clock()
        due = None if extract_after_ms is None else now + extract_after_ms
        return await self._db.run(observe, session, context, list(messages), now, due, episodes)

    async def queued_extractions(self, session: SessionRef) -> tuple[int, bool]:
        return await self._db.run(queued_extractions, session)

    async def session_messages(self, session: SessionRef, limit: int) -> builtins.list[StoredMessage]:
        return await self._db.run(session_messages, session, limit)

    async def window(
        self, session: SessionRef, message_id: str, radius: int
    ) -> tuple[SessionRef, builtins.list[StoredMessage]] | None:
        return await self._db.run(window, session, message_id, radius)

    async def claim(self, limit: int, max_messages: int) -> builtins.list[ExtractionJob]:
        return await self._db.run(claim, self._clock(), limit, max_messages, self._store.owner)

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
        space = self._store.space
        return await self._db.run(
            store_facts, list(news), list(fact_vectors), self._clock(), scope, normalize, None if plans is None else list(plans),
            completes, self._store.owner, None if space is None else space.dim, read,
        )  # fmt: skip

    async def erasures_seen(self, user_id: str) -> ErasuresSeen:
        log = await self._db.run(erasure_mark)
        return ErasuresSeen(user_id, None if log is None else log.last)

    async def fail(self, job: ExtractionJob, error: str, *, park: bool, retry_after_ms: int = 0) -> int:
        return await self._db.run(fail, job, error, self._clock(), park, retry_after_ms, self._store.owner)

    def clear_leases(self) -> None:
        """Start-up: release what earlier runs of this daemon (same node name) held."""
        pattern = self._store.node.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"

        def clear(conn: Conn) -> None:
            for table in ("extraction_jobs", "jobs"):
                conn.execute(
                    f"UPDATE {table} SET leased_until_ms = NULL, lease_owner = NULL WHERE lease_owner LIKE %s",
                    (pattern,),
                )

        self._db.run_sync(clear)

    async def next_due_ms(self) -> int | None:
        return await self._db.run(next_due_ms)

    async def status(self) -> dict[str, Any]:
        return await self._db.run(status)

    def retry_parked(self) -> dict[str, int]:
        return self._db.run_sync(retry_parked, self._clock())

    def schedule_backlog(self, *, retention_ms: int) -> int:
        now = self._clock()
        return self._db.run_sync(schedule_backlog, now, now - retention_ms)

    def prune_episodes(self, *, retention_ms: int) -> int:
        cutoff = self._clock() - retention_ms
        return in_batches(lambda: self._db.run_sync(episodes_store.prune_batch, cutoff), episodes_store.PRUNE_BATCH)

    def prune(self, *, retention_ms: int) -> int:
        cutoff = self._clock() - retention_ms
        return in_batches(lambda: self._db.run_sync(prune, cutoff), PRUNE_BATCH)
