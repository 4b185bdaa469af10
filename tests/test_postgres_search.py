"""The PostgreSQL backend's vector search in big scopes: through the generation's HNSW index,
with the scope filter applied inside an iterative scan, finding what the exact search finds.

Vectors are clustered (a few topics, each memory near its topic's centre), as embeddings are:
with random unit vectors every neighbour is about equally far and recall means nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from memoryd.store import NewMemory, QueryVector, Scope
from tests.postgres_server import shared

pytest.importorskip("psycopg")

from memoryd.store.postgres import PostgresStore  # noqa: E402
from memoryd.store.postgres import search as searching  # noqa: E402

DIM = 32


@pytest.fixture
def store() -> Iterator[PostgresStore]:
    with PostgresStore(shared().fresh_database(), pool_size=2) as opened:
        opened.configure_vector_space("clusters:test", DIM)
        yield opened


def clustered(rng: np.random.Generator, count: int, centres: np.ndarray) -> np.ndarray:
    picks = centres[rng.integers(0, len(centres), count)]
    vectors = picks + 0.35 * rng.standard_normal((count, DIM))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


async def test_a_big_scope_is_searched_through_hnsw_with_the_recall_of_an_exact_search(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((8, DIM))
    store.memories.add_many(NewMemory(f"alice note {i}", "alice", None, False, "t") for i in range(600))
    store.memories.add_many(NewMemory(f"other note {i}", f"user{i % 5}", None, False, "t") for i in range(600))
    while claimed := await store.jobs.claim_embed(1000):
        await store.jobs.complete_embed(list(zip(claimed, clustered(rng, len(claimed), centres), strict=True)))
    queries = clustered(rng, 20, centres)

    async def top(query: np.ndarray) -> list[str]:
        hits = await store.memories.search(Scope("alice"), "", limit=10, vector=QueryVector.at_hand(query))
        return [hit.id for hit in hits]

    exact = [await top(q) for q in queries]
    monkeypatch.setattr(searching, "HNSW_FROM", 100)

    def plan(conn: object) -> str:
        return searching.explain_knn(conn, Scope("alice"), queries[0], 1, 64, 0)  # type: ignore[arg-type]

    assert searching.hnsw_index(1) in store.db.run_sync(plan)
    approximate = [await top(q) for q in queries]
    found = sum(len(set(a) & set(e)) for a, e in zip(approximate, exact, strict=True))
    assert found / sum(map(len, exact)) >= 0.95
    assert all(len(a) == 10 for a in approximate)  # the scope filter never starves the result
