"""Embed jobs through ``JobQueue``: claims oldest first and leased, completion writes the vector,
jobs of deleted memories are dropped (moved here from the SQLite store's tests)."""

from __future__ import annotations

import pytest

from memoryd.errors import EmbeddingModelMismatch
from memoryd.store import QueryVector, Scope
from memoryd.store.interfaces import Backend
from tests.contract.helpers import note, unit

ALICE = Scope("alice")


async def test_claims_are_oldest_first_and_leased(backend: Backend) -> None:
    first, _ = await backend.memories.add(note("first"))
    second, _ = await backend.memories.add(note("second"))
    claimed = await backend.jobs.claim_embed(1)
    assert [j.memory_id for j in claimed] == [first.id]
    again = await backend.jobs.claim_embed(10)
    assert [j.memory_id for j in again] == [second.id]  # the first is leased
    assert await backend.jobs.claim_embed(10) == []


async def test_completing_writes_the_vector_and_removes_the_job(backend: Backend) -> None:
    await backend.memories.add(note("sailing"))
    [job] = await backend.jobs.claim_embed(10)
    await backend.jobs.complete_embed([(job, unit(*[1.0] * 8))])
    assert (await backend.jobs.backlog())["embed"] == 0
    assert await backend.jobs.next_due_ms() is None
    [hit] = await backend.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(unit(*[1.0] * 8)))
    assert hit.similarity == pytest.approx(1.0, abs=1e-3)
    await backend.jobs.complete_embed([(job, unit(*[1.0] * 8))])  # a repeat is harmless


async def test_jobs_of_deleted_memories_are_dropped(backend: Backend) -> None:
    gone, _ = await backend.memories.add(note("gone"))
    kept, _ = await backend.memories.add(note("kept"))
    await backend.memories.delete(ALICE, gone.id)
    assert [j.memory_id for j in await backend.jobs.claim_embed(10)] == [kept.id]


async def test_a_memory_deleted_while_embedding_gets_no_vector(backend: Backend) -> None:
    record, _ = await backend.memories.add(note("racing"))
    [job] = await backend.jobs.claim_embed(10)
    await backend.memories.delete(ALICE, record.id)
    await backend.jobs.complete_embed([(job, unit(*[1.0] * 8))])
    assert await backend.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(unit(*[1.0] * 8))) == []


def test_another_model_name_is_refused_before_its_dimension_is_known(backend: Backend) -> None:
    backend.check_vector_model("contract:test")  # the store's own model
    with pytest.raises(EmbeddingModelMismatch, match="memoryd reindex"):
        backend.check_vector_model("contract:other")
    backend.request_reindex("contract:other")  # `memoryd reindex` with the dimension unknown
    backend.check_vector_model("contract:other")
    backend.configure_vector_space("contract:other", 4)
    space = backend.vector_space()
    assert space is not None and (space.model, space.dim) == ("contract:other", 4)
    with pytest.raises(EmbeddingModelMismatch, match="memoryd reindex"):
        backend.check_vector_model("contract:test")
