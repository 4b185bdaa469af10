"""Observed messages and extraction jobs in a real store file: debounce, leases, the
high-water mark, backoff and parking, retention, memory.extract's window, fact storage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trio

from memoryd.errors import SupersedeRefused
from memoryd.extract import normalized_text
from memoryd.store import Learned, NewMemory, Scope, SessionContext, SessionRef, StoredMessage
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.conversations import conversations
from memoryd.store.sqlite.supersession.supersession import Plan
from tests.store_helpers import Clock

ALICE = SessionRef("alice", "chat-1", "s1")
CALLER = Scope("alice", "chat-1")
CONTEXT = SessionContext(chat_type="group", timezone="Europe/Paris", speaker_username="alice")


def messages(*texts: str, first_id: int = 1) -> list[StoredMessage]:
    return [
        StoredMessage(0, "user" if i % 2 == 0 else "assistant", text, f"m{first_id + i}", None, None, None, None)
        for i, text in enumerate(texts)
    ]


def fact(content: str, *, owner: str = "alice", shared: bool = False) -> NewMemory:
    return NewMemory(content=content, owner=owner, chat_id="chat-1", shared=shared, source="extraction")


async def test_a_job_is_due_only_once_the_session_has_been_quiet(store: Store, clock: Clock) -> None:
    clock.at = 1_000_000
    await store.conversations.observe(ALICE, CONTEXT, messages("hi", "hello"), extract_after_ms=5000)
    clock.at += 4000
    # A new message pushes the due time back: the debounce.
    await store.conversations.observe(ALICE, CONTEXT, messages("more"), extract_after_ms=5000)
    clock.at += 4000
    assert await store.conversations.claim(5, 50) == []
    assert await store.conversations.next_due_ms() == 1_000_000 + 4000 + 5000
    clock.at += 1000
    (job,) = await store.conversations.claim(5, 50)
    assert [m.content for m in job.messages] == ["hi", "hello", "more"]
    assert job.context == CONTEXT and job.session == ALICE
    # Leased: nobody else gets it.
    assert await store.conversations.claim(5, 50) == []


async def test_completing_moves_the_mark_so_messages_are_never_extracted_twice(store: Store, clock: Clock) -> None:
    await store.conversations.observe(ALICE, CONTEXT, messages("one", "two"), extract_after_ms=0)
    (job,) = await store.conversations.claim(1, 50)
    # A message arriving during the extraction waits for the next run.
    await store.conversations.observe(ALICE, CONTEXT, messages("three", first_id=3), extract_after_ms=0)
    learned = await store.conversations.store_facts(
        [fact("Alice likes tea")], [None], scope=CALLER, normalize=normalized_text, completes=job
    )
    assert [item.refreshed for item in learned] == [False]
    (again,) = await store.conversations.claim(1, 50)
    assert [m.content for m in again.messages] == ["three"]
    await store.conversations.store_facts([], [], scope=CALLER, normalize=normalized_text, completes=again)
    assert await store.conversations.claim(1, 50) == []
    assert (await store.conversations.status())["pending_sessions"] == 0


async def test_a_long_backlog_is_extracted_in_chunks_of_max_messages(store: Store) -> None:
    await store.conversations.observe(ALICE, CONTEXT, messages(*[f"m{i}" for i in range(5)]), extract_after_ms=0)
    (job,) = await store.conversations.claim(1, 3)
    assert len(job.messages) == 3
    await store.conversations.store_facts([], [], scope=CALLER, normalize=normalized_text, completes=job)
    (rest,) = await store.conversations.claim(1, 3)
    assert [m.content for m in rest.messages] == ["m3", "m4"]


async def test_start_up_clears_leases_of_a_crashed_run(store: Store) -> None:
    await store.conversations.observe(ALICE, CONTEXT, messages("one"), extract_after_ms=0)
    assert len(await store.conversations.claim(1, 50)) == 1
    store.conversations.clear_leases()
    (job,) = await store.conversations.claim(1, 50)
    assert [m.content for m in job.messages] == ["one"]


async def test_failures_back_off_honour_retry_after_and_park(store: Store, clock: Clock) -> None:
    clock.at = 1_000_000
    await store.conversations.observe(ALICE, CONTEXT, messages("one"), extract_after_ms=0)
    (job,) = await store.conversations.claim(1, 50)
    assert await store.conversations.fail(job, "LlmUnavailable: down", park=False, retry_after_ms=60_000) == 1
    assert await store.conversations.next_due_ms() == 1_060_000
    status = await store.conversations.status()
    assert status["failing_sessions"] == 1 and status["last_error"] == "LlmUnavailable: down"
    clock.at = 1_060_000
    (job,) = await store.conversations.claim(1, 50)
    assert job.attempts == 1
    await store.conversations.fail(job, "LlmRefused: 401", park=True)
    clock.at += 10**9
    assert await store.conversations.claim(1, 50) == []
    assert (await store.conversations.status())["parked_sessions"] == 1
    assert store.conversations.retry_parked() == {"extract": 1, "embed": 0}
    (job,) = await store.conversations.claim(1, 50)
    assert job.attempts == 0


async def test_retention_prunes_messages_and_the_jobs_left_without_any(store: Store, clock: Clock) -> None:
    clock.at = 1_000_000
    await store.conversations.observe(ALICE, CONTEXT, messages("old"), extract_after_ms=0)
    clock.at = 2_000_000
    other = SessionRef("bob", None, None)
    await store.conversations.observe(other, SessionContext(), messages("new"), extract_after_ms=0)
    assert store.conversations.prune(retention_ms=500_000) == 1
    status = await store.conversations.status()
    assert status["messages_held"] == 1 and status["pending_sessions"] == 1
    (job,) = await store.conversations.claim(5, 50)
    assert job.session == other


async def test_a_session_keeps_its_newest_messages_only(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conversations, "MAX_SESSION_MESSAGES", 3)
    await store.conversations.observe(ALICE, CONTEXT, messages("a", "b", "c", "d", "e"), extract_after_ms=None)
    kept = await store.conversations.session_messages(ALICE, 10)
    assert [m.content for m in kept] == ["c", "d", "e"]


async def test_observe_without_an_llm_stores_messages_but_queues_nothing(store: Store) -> None:
    assert await store.conversations.observe(ALICE, CONTEXT, messages("x", "y"), extract_after_ms=None) == 2
    status = await store.conversations.status()
    assert status == {**status, "messages_held": 2, "pending_sessions": 0}
    assert await store.conversations.claim(1, 50) == []


async def test_the_window_around_a_message_is_found_with_or_without_the_session_key(store: Store) -> None:
    await store.conversations.observe(ALICE, CONTEXT, messages(*"abcdefg"), extract_after_ms=None)
    found = await store.conversations.window(ALICE, "m4", 2)
    assert found is not None
    session, window = found
    assert session == ALICE and [m.content for m in window] == ["b", "c", "d", "e", "f"]
    keyless = await store.conversations.window(SessionRef("alice", "chat-1", None), "m1", 1)
    assert keyless is not None and [m.content for m in keyless[1]] == ["a", "b"]
    # Another user's or another chat's session is not searched.
    assert await store.conversations.window(SessionRef("bob", "chat-1", None), "m4", 2) is None
    assert await store.conversations.window(SessionRef("alice", "chat-2", None), "m4", 2) is None
    assert await store.conversations.window(ALICE, "m99", 2) is None
    # Any session key of that user and chat, whatever its characters.
    emoji = SessionRef("alice", "chat-1", "🍵 tea-time")
    await store.conversations.observe(emoji, CONTEXT, messages("tea", first_id=50), extract_after_ms=None)
    found_emoji = await store.conversations.window(SessionRef("alice", "chat-1", None), "m50", 1)
    assert found_emoji is not None and found_emoji[0] == emoji


async def test_exact_and_normalized_duplicates_refresh_instead_of_adding(store: Store) -> None:
    (first,) = await store.conversations.store_facts(
        [fact("Alice likes green tea.")], [None], scope=CALLER, normalize=normalized_text
    )
    learned = await store.conversations.store_facts(
        [fact("Alice likes green tea."), fact("alice likes  GREEN tea"), fact("Alice likes coffee")],
        [None, None, None],
        scope=CALLER,
        normalize=normalized_text,
    )
    assert [(item.memory_id == first.memory_id, item.refreshed) for item in learned] == [
        (True, True),
        (True, True),
        (False, False),
    ]
    # Another scope (a group memory of the chat) is not the same memory.
    (group,) = await store.conversations.store_facts(
        [fact("Alice likes green tea.", shared=True)], [None], scope=CALLER, normalize=normalized_text
    )
    assert not group.refreshed


async def test_near_duplicates_by_vector_refresh(tmp_path: Path, clock: Clock) -> None:
    with Store(tmp_path / "v.db", readers=1, clock=clock) as vstore:
        vstore.configure_vector_space("test-model", 4)
        (first,) = await vstore.conversations.store_facts(
            [fact("Alice likes tea")], [None], scope=CALLER, normalize=normalized_text
        )
        (job,) = await vstore.jobs.claim_embed(1)
        await vstore.jobs.complete_embed([(job, np.array([1.0, 0.0, 0.0, 0.0]))])
        near, far = await vstore.conversations.store_facts(
            [fact("Alice is fond of tea"), fact("Alice plays chess")],
            [np.array([0.99, 0.05, 0.0, 0.0]), np.array([0.0, 1.0, 0.0, 0.0])],
            scope=CALLER,
            normalize=normalized_text,
        )
        assert near.refreshed and near.memory_id == first.memory_id
        assert not far.refreshed
        # The new memory keeps the vector it was compared with: nothing left for the backfill.
        assert await vstore.jobs.claim_embed(5) == []
        assert (await vstore.jobs.backlog())["embed"] == 0


async def test_facts_stored_with_plans_supersede_and_return_the_stored_record(tmp_path: Path, clock: Clock) -> None:
    with Store(tmp_path / "v.db", readers=1, clock=clock) as vstore:
        vstore.configure_vector_space("test-model", 4)
        keyed = Plan(key="drink")

        async def drink(text: str, vector: list[float]) -> Learned:
            (learned,) = await vstore.conversations.store_facts(
                [fact(text)], [np.array(vector)], scope=CALLER, normalize=normalized_text, plans=[keyed]
            )
            return learned

        tea = await drink("Alice drinks tea", [1.0, 0.0, 0.0, 0.0])
        coffee = await drink("Alice drinks coffee", [0.0, 1.0, 0.0, 0.0])
        assert not coffee.refreshed and coffee.record is not None
        # The record handed to the add listeners is the stored row as a get shows it (its key included).
        assert coffee.record == await vstore.memories.get(Scope("alice", "chat-1"), coffee.memory_id)
        assert coffee.record.key == "drink"
        old = await vstore.memories.get(Scope("alice", "chat-1"), tea.memory_id)
        assert old is not None and old.superseded_by == coffee.memory_id
        # Each new memory kept the vector it was compared with.
        assert (await vstore.jobs.backlog())["embed"] == 0


async def test_the_maintenance_pass_prunes_messages_past_extraction_retention(store: Store, clock: Clock) -> None:
    from memoryd.config import ExtractionConfig, LifecycleConfig
    from memoryd.ids import DAY_MS
    from memoryd.service.maintenance import Maintenance

    clock.at = 100 * DAY_MS
    await store.conversations.observe(ALICE, CONTEXT, messages("old"), extract_after_ms=None)
    clock.at += 2 * DAY_MS
    await store.conversations.observe(ALICE, CONTEXT, messages("new", first_id=2), extract_after_ms=None)
    maintenance = Maintenance(
        store.lifecycle, LifecycleConfig(), conversations=store.conversations,
        extraction=ExtractionConfig(retention_days=1),
    )  # fmt: skip
    summary = await maintenance.run_once()
    assert summary is not None and summary["messages_pruned"] == 1
    assert [m.content for m in await store.conversations.session_messages(ALICE, 10)] == ["new"]


async def test_concurrent_observes_and_adds_commit_together_each_whole(store: Store) -> None:
    # memory.observe and memory.add calls that arrive together share write transactions
    # (write_batch): every message and memory is stored once, in its own session and order.
    sessions = [SessionRef("alice", "chat-1", f"s{i}") for i in range(12)]

    async def observe(session: SessionRef) -> None:
        assert await store.conversations.observe(session, CONTEXT, messages("hi", "hello"), extract_after_ms=0) == 2

    refused: list[BaseException] = []

    async def refused_add() -> None:  # names nothing to supersede: refused, its savepoint alone
        with pytest.raises(SupersedeRefused) as caught:
            await store.supersession.add(
                Scope("alice", "chat-1"), fact("Alice likes coffee"), Plan(supersedes="0" * 26)
            )
        refused.append(caught.value)

    async with trio.open_nursery() as nursery:
        for session in sessions:
            nursery.start_soon(observe, session)
            if session is sessions[5]:
                nursery.start_soon(refused_add)
        for i in range(8):  # as memory.add stores them
            nursery.start_soon(
                store.supersession.add, Scope("alice", "chat-1"), fact(f"Alice likes tea number {i}"), Plan()
            )
    writes, batches = store.small_writes.writes, store.small_writes.batches
    assert writes == 21 and batches < writes and len(refused) == 1
    for session in sessions:
        assert [m.content for m in await store.conversations.session_messages(session, 10)] == ["hi", "hello"]
    assert len(await store.memories.list(Scope("alice", "chat-1"), limit=50)) == 8
