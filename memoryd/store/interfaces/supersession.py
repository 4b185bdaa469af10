"""``SupersessionStore``: adds that may replace older memories, their deferred jobs, history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memoryd.store.records import MemoryRecord, NewMemory
from memoryd.store.supersession_records import Plan, Ruling, Stored, SupersedeJob
from memoryd.store.visibility import Scope


class SupersessionStore(Protocol):
    async def add(self, scope: Scope, new: NewMemory, plan: Plan) -> Stored:
        """Store ``new`` and replace what ``plan`` says it replaces, all or nothing
        (SupersedeRefused: nothing written)."""
        ...

    async def history(self, scope: Scope, prefix: str) -> list[MemoryRecord] | None:
        """The versions around a visible memory, oldest first; None when the caller sees none."""
        ...

    async def claim_jobs(self, limit: int) -> list[SupersedeJob]:
        """Lease due 'supersede' jobs (JobQueue's lease rules)."""
        ...

    async def job_candidates(
        self, job: SupersedeJob, *, similarity: float, limit: int, wait_for_vector: bool
    ) -> tuple[MemoryRecord, list[tuple[int, MemoryRecord]]] | None: ...

    async def complete_job(self, job: SupersedeJob, rulings: Sequence[tuple[int, Ruling]]) -> list[str]:
        """Apply the rulings and finish the job; the ids superseded."""
        ...

    async def fail_job(self, job: SupersedeJob, error: str) -> None: ...

    async def next_due_ms(self) -> int | None: ...
