"""Store: durable embed jobs — enqueue, claim/lease, complete, fail with backoff."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memoryd.ids import now_ms
from memoryd.store import Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.jobs import jobs
from tests.store_helpers import note, sql

DIM = 8
ALICE = Scope("alice")


def vector() -> np.ndarray:
    return np.ones(DIM, dtype=np.float32)


@pytest.fixture
def store(store: Store) -> Iterator[Store]:
    store.configure_vector_space("test:m", DIM)
    yield store


async def test_adding_a_memory_queues_one_embed_job(store: Store) -> None:
    record, _ = await store.memories.add(note("a"))
    await store.memories.add(note("a"))  # duplicate: no second job
    assert (await store.jobs.backlog())["embed"] == 1
    [job] = await store.jobs.claim_embed(10)
    assert (job.memory_id, job.content, job.attempts, job.generation) == (record.id, "a", 0, 1)


async def test_without_a_vector_space_nothing_is_queued(tmp_path: Path) -> None:
    with Store(tmp_path / "memory.db") as store:
        await store.memories.add(note("a"))
        assert (await store.jobs.backlog())["embed"] == 0
        assert await store.jobs.claim_embed(10) == []
        assert store.jobs.enqueue_missing_embeddings() == 0


async def test_failure_backs_off_and_keeps_the_error(store: Store) -> None:
    await store.memories.add(note("x"))
    [job] = await store.jobs.claim_embed(10)
    before = now_ms()
    await store.jobs.fail([job], "embedder down: connection refused")
    due = await store.jobs.next_due_ms("embed")
    assert due is not None
    assert before + jobs.FIRST_BACKOFF_MS // 2 <= due <= now_ms() + jobs.FIRST_BACKOFF_MS
    assert await store.jobs.claim_embed(10) == []  # not due yet
    assert (await store.jobs.backlog())["embed"] == 1
    assert sql(store.path, "SELECT attempts, last_error FROM jobs") == [(1, "embedder down: connection refused")]


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    rng = random.Random(7)
    for attempts in range(1, 40):
        ceiling = min(jobs.MAX_BACKOFF_MS, jobs.FIRST_BACKOFF_MS * 2 ** (attempts - 1))
        delays = {jobs.backoff_ms(attempts, rng) for _ in range(20)}
        assert all(ceiling // 2 <= d <= ceiling for d in delays)
        assert len(delays) > 1  # jitter
    assert max(jobs.backoff_ms(1000, rng) for _ in range(100)) <= 10 * 60 * 1000


async def test_start_up_releases_leases_and_queues_missing_embeddings(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Store(path) as store:
        await store.memories.add(note("before any embedder"))
        store.configure_vector_space("m", DIM)
        await store.memories.add(note("after"))
        claimed = await store.jobs.claim_embed(10)
        assert len(claimed) == 2
    # The daemon died while embedding: the jobs are leased but nobody works on them.
    with Store(path) as store:
        assert await store.jobs.claim_embed(10) == []
        assert store.jobs.enqueue_missing_embeddings() == 0  # both still have a job...
        assert await store.jobs.claim_embed(10) == []  # ...leased: queueing frees no lease
        store.jobs.release_leases()
        assert len(await store.jobs.claim_embed(10)) == 2


async def test_enqueue_missing_finds_memories_without_a_vector_or_job(store: Store) -> None:
    await store.memories.add(note("a"))
    [job] = await store.jobs.claim_embed(10)
    await store.jobs.complete_embed([(job, vector())])
    await store.memories.add(note("b"))
    sql(store.path, "DELETE FROM jobs")  # e.g. lost in an old version
    assert store.jobs.enqueue_missing_embeddings() == 1
    assert store.jobs.enqueue_missing_embeddings() == 0
    await store.memories.add(note("expired", expires_at_ms=now_ms() - 1))
    sql(store.path, "DELETE FROM jobs")
    assert store.jobs.enqueue_missing_embeddings() == 1  # "b" again, not the expired one


async def test_a_stale_claim_leaves_alone_the_job_that_got_its_id_since(store: Store) -> None:
    """SQLite gives a freed job id out again; completing, releasing or failing a job claimed
    earlier touches only that job, never the next memory's under the same id."""
    await store.memories.add(note("first"))
    [stale] = await store.jobs.claim_embed(10)
    assert await store.jobs.complete_embed([(stale, vector())]) == 1  # done by someone else first
    later, _ = await store.memories.add(note("second"))
    assert sql(store.path, "SELECT job_id FROM jobs") == [(stale.job_id,)]  # the same id again
    assert await store.jobs.complete_embed([(stale, vector())]) == 0
    await store.jobs.fail([stale], "late failure")
    [job] = await store.jobs.claim_embed(10)
    assert (job.memory_id, job.attempts) == (later.id, 0)  # still due, no error, not completed
    await store.jobs.release([stale])
    assert await store.jobs.claim_embed(10) == []  # the claim just taken still holds
    assert await store.jobs.complete_embed([(job, vector())]) == 1
    assert (await store.jobs.backlog())["embed"] == 0
