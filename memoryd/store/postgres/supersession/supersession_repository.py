"""``Supersessions``: ``interfaces.SupersessionStore`` on PostgreSQL (the add path, its job,
history), each call one transaction of ``supersession.py`` or ``supersession_jobs.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres.store_part import StorePart
from memoryd.store.postgres.supersession.supersession import add, history
from memoryd.store.postgres.supersession.supersession_jobs import claim_jobs, complete_job, job_candidates
from memoryd.store.records import MemoryRecord, NewMemory
from memoryd.store.supersession_records import Plan, Ruling, Stored, SupersedeJob
from memoryd.store.visibility import Scope


class Supersessions(StorePart):
    """``interfaces.SupersessionStore`` on PostgreSQL."""

    async def add(self, scope: Scope, new: NewMemory, plan: Plan) -> Stored:
        stored = await self._db.run(add, scope, new, plan, self._clock(), pipeline=True)
        self._store.write_count += 1
        return stored

    async def history(self, scope: Scope, prefix: str) -> list[MemoryRecord] | None:
        now = self._clock()
        records = await self._db.run(history, scope, prefix, now)
        if records:
            self._store.hits.note((record.id for record in records), now)
        return records

    async def claim_jobs(self, limit: int) -> list[SupersedeJob]:
        return await self._db.run(claim_jobs, limit, self._clock(), self._store.owner)

    async def job_candidates(
        self, job: SupersedeJob, *, similarity: float, limit: int, wait_for_vector: bool
    ) -> tuple[MemoryRecord, list[tuple[int, MemoryRecord]]] | None:
        return await self._db.run(job_candidates, job, similarity, limit, self._clock(), wait_for_vector)

    async def complete_job(self, job: SupersedeJob, rulings: Sequence[tuple[int, Ruling]]) -> list[str]:
        return await self._db.run(complete_job, job, list(rulings), self._clock(), self._store.owner)

    async def fail_job(self, job: SupersedeJob, error: str) -> None:
        await self._db.run(job_rows.fail, [job.job_id], error, self._clock(), self._store.owner)

    async def next_due_ms(self) -> int | None:
        return await self._db.run(job_rows.next_due_ms, rows.SUPERSEDE)
