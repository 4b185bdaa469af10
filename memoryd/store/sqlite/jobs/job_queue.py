"""``JobQueue``: the durable background work of the daemon's workers (today: 'embed').

The backfill worker claims due jobs, completes them with their results or fails them (they back
off, see ``jobs.py``).  A new kind of work (e.g. 'extract') gets its own claim/complete pair
here and its kind in ``jobs.KINDS``; ``fail``, ``next_due_ms`` and ``backlog`` serve every kind.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import apsw
import numpy.typing as npt

from memoryd.store.records import EmbedJob
from memoryd.store.sqlite.db.database import Database
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.vectors import vectors


class JobQueue:
    def __init__(self, db: Database, clock: Callable[[], int]) -> None:
        self._db = db
        self._clock = clock
        self._rng = random.Random()

    async def claim_embed(self, limit: int) -> list[EmbedJob]:
        """Lease up to ``limit`` due embed jobs, oldest first."""
        return await self._db.write(jobs.claim_embed, limit, self._clock())

    async def complete_embed(self, results: Sequence[tuple[EmbedJob, npt.ArrayLike]]) -> int:
        """Store the vectors of finished embed jobs (EmbeddingModelMismatch for a wrong length);
        how many were written (a memory that went meanwhile, or a changed space, is not)."""
        if not results:
            return 0
        written: int = await self._db.write(jobs.complete_embed, list(results), self._clock())
        return written

    async def release(self, leased: Sequence[jobs.ClaimedJob]) -> None:
        """Hand leased jobs back to the backfill, due now."""
        if leased:
            await self._db.write(jobs.release, list(leased))

    async def fail(self, failed: Sequence[jobs.ClaimedJob], error: str) -> None:
        """Release the jobs for a retry after a growing, jittered delay; ``error`` is kept."""
        if failed:
            await self._db.write(jobs.fail, list(failed), error, self._clock(), self._rng)

    async def next_due_ms(self, kind: str = jobs.EMBED) -> int | None:
        """When the next job of ``kind`` can be claimed (wall-clock ms), None when there is none."""
        return await self._db.read(jobs.next_due_ms, kind)

    async def backlog(self) -> dict[str, int]:
        """Pending jobs by kind."""
        return await self._db.read(jobs.backlog)

    def release_leases(self) -> None:
        """Start-up, before the first request: one daemon owns the file, so every lease left
        is a previous run's."""
        self._db.write_sync(jobs.clear_leases)

    def enqueue_missing_embeddings(self) -> int:
        """Start-up: queue an embed job for every live memory without a vector in the current
        space. Returns how many were queued."""
        return self._db.write_sync(_enqueue_missing, self._clock())


def _enqueue_missing(db: apsw.Connection, now_ms: int) -> int:
    space = vectors.read_space(db)
    return 0 if space is None else jobs.enqueue_missing(db, space, now_ms)
