"""``Supersessions``: what supersession needs from the store (the add path, its job, history).

Each coroutine runs one function of ``supersession.py`` in the writer or a reader thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from memoryd.store.records import MemoryRecord, NewMemory
from memoryd.store.sqlite.db.database import Database
from memoryd.store.sqlite.db.write_batch import WriteBatcher
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.memories.hits import HitCounter
from memoryd.store.sqlite.supersession import supersession, supersession_jobs
from memoryd.store.sqlite.supersession.supersession import Plan, Ruling, Stored
from memoryd.store.sqlite.supersession.supersession_jobs import SupersedeJob
from memoryd.store.visibility import Scope


class Supersessions:
    def __init__(self, db: Database, hits: HitCounter, clock: Callable[[], int], small_writes: WriteBatcher) -> None:
        """``small_writes``: adds (and the store's other small writes) that arrive together
        commit together (``write_batch``)."""
        self._db = db
        self._hits = hits
        self._clock = clock
        self._small_writes = small_writes

    async def add(self, scope: Scope, new: NewMemory, plan: Plan) -> Stored:
        """Store ``new`` as ``MemoryRepository.add`` does, and replace what ``plan`` says it
        replaces, all or nothing (SupersedeRefused: nothing written); concurrent adds share
        one transaction, each in a savepoint."""
        return await self._small_writes.write(
            functools.partial(supersession.add, scope=scope, new=new, plan=plan, now_ms=self._clock())
        )

    async def history(self, scope: Scope, prefix: str) -> list[MemoryRecord] | None:
        """The versions around a visible memory, oldest first; None when the caller sees none."""
        records = await self._db.read(supersession.history, scope, prefix, self._clock())
        if records:
            self._hits.note((record.id for record in records), self._clock())
        return records

    async def claim_jobs(self, limit: int) -> list[SupersedeJob]:
        return await self._db.write(supersession_jobs.claim_jobs, limit, self._clock())

    async def job_candidates(
        self, job: SupersedeJob, *, similarity: float, limit: int, wait_for_vector: bool
    ) -> tuple[MemoryRecord, list[tuple[int, MemoryRecord]]] | None:
        return await self._db.read(
            supersession_jobs.job_candidates, job, similarity, limit, self._clock(), wait_for_vector=wait_for_vector
        )

    async def complete_job(self, job: SupersedeJob, rulings: Sequence[tuple[int, Ruling]]) -> list[str]:
        return await self._db.write(supersession_jobs.complete_job, job, list(rulings), self._clock())

    async def fail_job(self, job: SupersedeJob, error: str) -> None:
        """Retry later (growing, jittered delay), e.g. while the memory's vector is not there yet."""
        await self._db.write(jobs.fail, [job], error, self._clock(), kind=jobs.SUPERSEDE)

    async def next_due_ms(self) -> int | None:
        return await self._db.read(jobs.next_due_ms, jobs.SUPERSEDE)
