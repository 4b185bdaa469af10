"""``interfaces.JobQueue`` on PostgreSQL: embed jobs, leased by any daemon on the database."""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import numpy.typing as npt

from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres.store_part import StorePart
from memoryd.store.records import EmbedJob


class Jobs(StorePart):
    """``interfaces.JobQueue`` on PostgreSQL: leases shared by every daemon."""

    async def claim_embed(self, limit: int) -> builtins.list[EmbedJob]:
        return await self._db.run(job_rows.claim_embed, limit, self._clock(), self._store.owner)

    async def complete_embed(self, results: Sequence[tuple[EmbedJob, npt.ArrayLike]]) -> int:
        space = self._store.space
        if space is None:
            return 0
        return await self._db.run(job_rows.complete_embed, builtins.list(results), space.dim, self._store.owner)

    async def release(self, leased: Sequence[EmbedJob]) -> None:
        await self._db.run(job_rows.release, [job.job_id for job in leased], self._store.owner)

    async def fail(self, failed: Sequence[EmbedJob], error: str) -> None:
        await self._db.run(job_rows.fail, [job.job_id for job in failed], error, self._clock(), self._store.owner)

    async def next_due_ms(self, kind: str = "embed") -> int | None:
        return await self._db.run(job_rows.next_due_ms, kind)

    async def backlog(self) -> dict[str, int]:
        return await self._db.run(job_rows.backlog)

    def release_leases(self) -> None:
        """Nothing: a lease is held by one daemon of several (``lease_owner``), and a dead
        daemon's leases run out (``LEASE_MS``) for the others to claim."""

    def enqueue_missing_embeddings(self) -> int:
        return self._db.run_sync(job_rows.enqueue_missing, self._clock())
