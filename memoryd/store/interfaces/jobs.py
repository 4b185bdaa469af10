"""``JobQueue``: the durable embedding work of the backfill worker.

Every queue of the store (embed and supersede jobs here, extraction jobs in the
``ConversationStore``) leases the same way: a claim takes due jobs no one holds and leases them
for a while; a job whose lease ran out is due again (its holder died); a failure releases it
for a retry after a growing, jittered delay, and after too many it is parked.  One job never
has two holders at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy.typing as npt

from memoryd.store.records import EmbedJob


class JobQueue(Protocol):
    async def claim_embed(self, limit: int) -> list[EmbedJob]:
        """Lease up to ``limit`` due embed jobs, oldest first."""
        ...

    async def complete_embed(self, results: Sequence[tuple[EmbedJob, npt.ArrayLike]]) -> int:
        """Store finished vectors (EmbeddingModelMismatch for a wrong length); how many."""
        ...

    async def release(self, leased: Sequence[EmbedJob]) -> None:
        """Hand leased jobs back, due now."""
        ...

    async def fail(self, failed: Sequence[EmbedJob], error: str) -> None:
        """Release for a retry after a growing, jittered delay; ``error`` is kept."""
        ...

    async def next_due_ms(self, kind: str = "embed") -> int | None:
        """When the next job of ``kind`` can be claimed (wall-clock ms); None when none."""
        ...

    async def backlog(self) -> dict[str, int]:
        """Pending jobs by kind."""
        ...

    def release_leases(self) -> None:
        """Start-up, before the first request: hand back the embed jobs a previous run of this
        daemon left leased (it died holding them), so they are due at once rather than when
        their leases run out.  Leases taken after this are the running daemon's own."""
        ...

    def enqueue_missing_embeddings(self) -> int:
        """Start-up: queue an embed job for every live memory without a current vector (leases
        are left as they are: an add answered meanwhile may be embedding its own text)."""
        ...
