"""Job leases through ``JobQueue`` (embed jobs) and ``ConversationStore`` (extraction jobs): a claim
leases, a lease that runs out makes the job claimable again, failures back off and finally park,
and one job never has two holders."""

from __future__ import annotations

import numpy as np
import trio

from memoryd.store import Scope, SessionContext, SessionRef, StoredMessage
from memoryd.store.interfaces import Backend
from tests.contract.helpers import note, unit
from tests.store_helpers import Clock

T0 = 1_700_000_000_000
SESSION = SessionRef("alice", "chat-1", "s1")


async def test_a_claim_leases_and_an_expired_lease_is_claimed_again(backend: Backend, clock: Clock) -> None:
    clock.at = T0
    await backend.memories.add(note("one"))
    (job,) = await backend.jobs.claim_embed(10)
    assert await backend.jobs.claim_embed(10) == []  # held
    lease_end = await backend.jobs.next_due_ms()
    assert lease_end is not None and lease_end > T0
    clock.at = lease_end  # the holder died: the lease ran out
    (again,) = await backend.jobs.claim_embed(10)
    assert again.job_id == job.job_id and again.memory_id == job.memory_id
    assert await backend.jobs.complete_embed([(again, unit(1))]) == 1
    assert await backend.jobs.claim_embed(10) == [] and await backend.jobs.next_due_ms() is None
    assert (await backend.jobs.backlog())["embed"] == 0


async def test_a_released_job_is_due_at_once_and_a_failed_one_after_a_growing_backoff(
    backend: Backend, clock: Clock
) -> None:
    clock.at = T0
    await backend.memories.add(note("one"))
    (job,) = await backend.jobs.claim_embed(10)
    await backend.jobs.release([job])
    (job,) = await backend.jobs.claim_embed(10)
    delays = []
    for _ in range(4):
        await backend.jobs.fail([job], "EmbedderUnavailable: down")
        due = await backend.jobs.next_due_ms()
        assert due is not None and due > clock.at
        assert await backend.jobs.claim_embed(10) == []  # not before its time
        delays.append(due - clock.at)
        clock.at = due
        (job,) = await backend.jobs.claim_embed(10)
    assert job.attempts == 4
    assert max(delays[2:]) > min(delays[:2])  # it grows (with jitter)


async def test_concurrent_claims_never_share_a_job(backend: Backend) -> None:
    backend.memories.add_many(note(f"memory {i}") for i in range(60))
    claimed: list[list[int]] = []

    async def claim() -> None:
        claimed.append([job.job_id for job in await backend.jobs.claim_embed(7)])

    async with trio.open_nursery() as nursery:
        for _ in range(12):
            nursery.start_soon(claim)
    every = [job_id for batch in claimed for job_id in batch]
    assert len(every) == len(set(every)) == 60


async def test_vectors_of_a_claimed_job_reach_search(backend: Backend) -> None:
    await backend.memories.add(note("sailing on the lake"))
    (job,) = await backend.jobs.claim_embed(10)
    await backend.jobs.complete_embed([(job, unit(0, 1))])
    from memoryd.store import QueryVector

    hits = await backend.memories.search(Scope("alice"), "", limit=5, vector=QueryVector.at_hand(unit(0, 1)))
    assert [h.content for h in hits] == ["sailing on the lake"]
    assert np.isclose(hits[0].score, hits[0].score)  # a number


def messages(*texts: str, first: int = 1) -> list[StoredMessage]:
    return [StoredMessage(0, "user", text, f"m{first + i}", None, None, None, None) for i, text in enumerate(texts)]


async def test_extraction_jobs_lease_back_off_park_and_retry(backend: Backend, clock: Clock) -> None:
    clock.at = T0
    await backend.conversations.observe(
        SESSION, SessionContext(chat_type="private"), messages("hello"), extract_after_ms=0
    )
    (job,) = await backend.conversations.claim(5, 50)
    assert await backend.conversations.claim(5, 50) == []  # leased
    await backend.conversations.fail(job, "LlmUnavailable: down", park=False, retry_after_ms=60_000)
    assert await backend.conversations.next_due_ms() == T0 + 60_000
    clock.at = T0 + 60_000
    (job,) = await backend.conversations.claim(5, 50)
    assert job.attempts == 1
    await backend.conversations.fail(job, "LlmRefused: 401", park=True)
    clock.at += 10**10
    assert await backend.conversations.claim(5, 50) == []  # parked: never due by itself
    assert (await backend.conversations.status())["parked_sessions"] == 1
    assert backend.conversations.retry_parked()["extract"] == 1
    (job,) = await backend.conversations.claim(5, 50)
    assert job.attempts == 0


async def test_an_extraction_lease_that_ran_out_is_claimed_again_and_start_up_clears_leases(
    backend: Backend, clock: Clock
) -> None:
    clock.at = T0
    await backend.conversations.observe(SESSION, SessionContext(), messages("hello"), extract_after_ms=0)
    (job,) = await backend.conversations.claim(5, 50)
    lease_end = await backend.conversations.next_due_ms()
    assert lease_end is not None and lease_end > T0
    clock.at = lease_end
    (again,) = await backend.conversations.claim(5, 50)
    assert again.session == job.session
    backend.conversations.clear_leases()
    assert len(await backend.conversations.claim(5, 50)) == 1
