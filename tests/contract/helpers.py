"""What the contract tests share: memories to add, unit vectors, and the embed loop (all through
the interfaces)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from memoryd.store import NewMemory
from memoryd.store.interfaces import Backend

#: The length of the suite's vectors (its vector space is configured with it).
DIM = 8


def note(
    content: str, owner: str = "alice", *, chat_id: str | None = None, shared: bool = False, **fields: object
) -> NewMemory:
    return NewMemory(content=content, owner=owner, chat_id=chat_id, shared=shared, source="t", **fields)  # type: ignore[arg-type]


def unit(*components: float) -> np.ndarray:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(components) or 1] = components or (1.0,)
    return vector / np.linalg.norm(vector)


async def embed_all(store: Backend, vector_for: Callable[[str], np.ndarray]) -> int:
    """Claim every due embed job and complete it with ``vector_for(content)``."""
    done = 0
    while claimed := await store.jobs.claim_embed(1000):
        done += await store.jobs.complete_embed([(job, vector_for(job.content)) for job in claimed])
    return done
