"""The learned query adapter in relevance, on both engines: a store of the local model's vectors
(``local:all-MiniLM-L6-v2``, 384 dimensions) reads each candidate's adapted cosine, and its
relevance differs from the fallback model's; a store of another embedder's vectors gets the
fallback (the same relevance as with the adapter turned off)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memoryd.store import QueryVector, Scope, query_adapter
from memoryd.store.interfaces import Backend
from tests.contract.conftest import BACKENDS
from tests.contract.helpers import embed_all, note
from tests.store_helpers import Clock

FACTS = [f"fact number {i} about tea" for i in range(12)]


def vectors() -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(7)
    by_content = {}
    for content in FACTS:
        vector = rng.standard_normal(query_adapter.DIM).astype(np.float32)
        by_content[content] = vector / np.linalg.norm(vector)
    # A query halfway to one fact (cosine about 0.55), where relevance is neither 0 nor 1.
    noise = rng.standard_normal(query_adapter.DIM).astype(np.float32)
    query = by_content[FACTS[3]] + 1.5 * noise / np.linalg.norm(noise)
    return by_content, (query / np.linalg.norm(query)).astype(np.float32)


async def relevances(backend_name: str, tmp_path: Path, clock: Clock, model: str) -> dict[str, float]:
    folder = tmp_path / model.replace(":", "_")
    folder.mkdir()
    by_content, query = vectors()
    with BACKENDS[backend_name](folder, clock) as store:
        store.configure_vector_space(model, query_adapter.DIM)
        await fill(store, by_content)
        hits = await store.memories.search(
            Scope("alice"), "tea", limit=20, vector=QueryVector.at_hand(query), min_relevance=0.0
        )
    assert {hit.content for hit in hits} == set(FACTS)
    return {hit.content: hit.relevance for hit in hits}


async def fill(store: Backend, by_content: dict[str, np.ndarray]) -> None:
    store.memories.add_many(note(content) for content in FACTS)
    await embed_all(store, lambda content: by_content[content])


@pytest.fixture(params=sorted(BACKENDS))
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_the_local_models_store_reads_the_adapted_cosine_and_another_embedders_gets_the_fallback(
    backend_name: str, tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert query_adapter.matrix() is not None  # the shipped file loads
    local = await relevances(backend_name, tmp_path, clock, query_adapter.MODEL_ID)
    other = await relevances(backend_name, tmp_path, clock, "ollama:nomic-embed-text")
    # The adapted cosine changes relevance where it applies...
    assert max(abs(local[c] - other[c]) / other[c] for c in FACTS) > 0.05
    # ... and the other embedder's relevance is the fallback model's: the local model's store
    # with the adapter turned off gives exactly the same.
    monkeypatch.setattr(query_adapter, "adapted", lambda unit, model: None)
    (tmp_path / "off").mkdir()
    off = await relevances(backend_name, tmp_path / "off", clock, query_adapter.MODEL_ID)
    assert off == pytest.approx(other, abs=1e-9)
