"""Observed conversations through ``ConversationStore``: observe, the high-water mark that keeps a
message from being extracted twice, the debounce, storing facts, retention."""

from __future__ import annotations

import pytest

from memoryd.errors import ExtractedMessagesGone, ExtractionJobGone
from memoryd.store import MessagesRead, NewMemory, Scope, SessionContext, SessionRef, StoredMessage
from memoryd.store.interfaces import Backend
from tests.store_helpers import Clock

T0 = 1_700_000_000_000
SESSION = SessionRef("alice", "chat-1", "s1")
CONTEXT = SessionContext(chat_type="private", timezone="Europe/Paris")


def messages(*texts: str, first: int = 1) -> list[StoredMessage]:
    return [StoredMessage(0, "user", text, f"m{first + i}", None, None, None, None) for i, text in enumerate(texts)]


def fact(content: str) -> NewMemory:
    return NewMemory(content=content, owner="alice", chat_id="chat-1", shared=False, source="extraction")


async def test_observe_stores_messages_in_order_and_the_job_waits_for_quiet(backend: Backend, clock: Clock) -> None:
    clock.at = T0
    assert await backend.conversations.observe(SESSION, CONTEXT, messages("one"), extract_after_ms=5000) == 1
    clock.at = T0 + 3000  # each observe pushes the extraction back
    assert await backend.conversations.observe(SESSION, CONTEXT, messages("two", first=2), extract_after_ms=5000) == 1
    assert [m.content for m in await backend.conversations.session_messages(SESSION, 10)] == ["one", "two"]
    clock.at = T0 + 5000
    assert await backend.conversations.claim(5, 50) == []  # not quiet yet
    assert (
        await backend.conversations.observe(
            SessionRef("bob", "chat-1", "s1"), CONTEXT, messages("x"), extract_after_ms=None
        )
        == 1
    )
    clock.at = T0 + 8000
    (job,) = await backend.conversations.claim(5, 50)
    assert [m.content for m in job.messages] == ["one", "two"] and job.context.timezone == "Europe/Paris"


async def test_the_high_water_mark_moves_with_the_facts_so_nothing_is_extracted_twice(
    backend: Backend, clock: Clock
) -> None:
    clock.at = T0
    await backend.conversations.observe(SESSION, CONTEXT, messages("I like tea"), extract_after_ms=0)
    (job,) = await backend.conversations.claim(5, 50)
    learned = await backend.conversations.store_facts(
        [fact("alice likes tea")], [None], scope=Scope("alice"), normalize=str.casefold, completes=job
    )
    assert [item.refreshed for item in learned] == [False]
    assert await backend.conversations.claim(5, 50) == []
    await backend.conversations.observe(SESSION, CONTEXT, messages("and coffee", first=2), extract_after_ms=0)
    (job,) = await backend.conversations.claim(5, 50)
    assert [m.content for m in job.messages] == ["and coffee"]
    # The same fact again refreshes the memory instead of adding one.
    again = await backend.conversations.store_facts(
        [fact("Alice likes tea")], [None], scope=Scope("alice"), normalize=str.casefold, completes=job
    )
    assert [item.refreshed for item in again] == [True]
    assert [r.content for r in await backend.memories.list(Scope("alice"), limit=10)] == ["alice likes tea"]


async def test_a_long_backlog_is_claimed_in_chunks(backend: Backend) -> None:
    await backend.conversations.observe(SESSION, CONTEXT, messages(*[f"m{i}" for i in range(7)]), extract_after_ms=0)
    (job,) = await backend.conversations.claim(5, 3)
    assert len(job.messages) == 3


async def test_the_window_around_a_message(backend: Backend) -> None:
    await backend.conversations.observe(SESSION, CONTEXT, messages("a", "b", "c", "d", "e"), extract_after_ms=None)
    found = await backend.conversations.window(SESSION, "m3", 1)
    assert found is not None
    session, window = found
    assert session == SESSION and [m.content for m in window] == ["b", "c", "d"]
    assert await backend.conversations.window(SESSION, "nope", 1) is None


async def test_retention_prunes_old_messages(backend: Backend, clock: Clock) -> None:
    clock.at = T0
    await backend.conversations.observe(SESSION, CONTEXT, messages("old"), extract_after_ms=None)
    clock.at = T0 + 10 * 86_400_000
    await backend.conversations.observe(SESSION, CONTEXT, messages("new", first=2), extract_after_ms=None)
    assert backend.conversations.prune(retention_ms=5 * 86_400_000) == 1
    assert [m.content for m in await backend.conversations.session_messages(SESSION, 10)] == ["new"]


async def test_queued_extractions_counts_the_owners_waiting_sessions(backend: Backend, clock: Clock) -> None:
    clock.at = T0
    conversations = backend.conversations
    assert await conversations.queued_extractions(SESSION) == (0, False)
    await conversations.observe(SESSION, CONTEXT, messages("one"), extract_after_ms=5000)
    await conversations.observe(SessionRef("alice", "chat-2", "s2"), CONTEXT, messages("two"), extract_after_ms=5000)
    await conversations.observe(SessionRef("alice", "chat-3", "s3"), CONTEXT, messages("kept"), extract_after_ms=None)
    await conversations.observe(SessionRef("bob", "chat-1", "s1"), CONTEXT, messages("x"), extract_after_ms=5000)
    assert await conversations.queued_extractions(SESSION) == (2, True)
    assert await conversations.queued_extractions(SessionRef("alice", "chat-9", "new")) == (2, False)
    assert await conversations.queued_extractions(SessionRef("bob", "chat-1", "s1")) == (1, True)


async def test_the_facts_of_a_job_erased_while_the_llm_answered_are_not_stored(backend: Backend, clock: Clock) -> None:
    # forget_all while the extraction worker waits on the LLM: what it learned from the erased
    # messages must not come back as memories (SQLite once stored them).
    clock.at = T0
    await backend.conversations.observe(SESSION, CONTEXT, messages("I like tea"), extract_after_ms=0)
    (job,) = await backend.conversations.claim(5, 50)
    await backend.memories.erase_user("alice", actor="alice", include_group=True, usernames=[])
    with pytest.raises(ExtractionJobGone):
        await backend.conversations.store_facts(
            [fact("alice likes tea")], [None], scope=Scope("alice"), normalize=str.casefold, completes=job
        )
    assert await backend.memories.list(Scope("alice"), limit=10) == []
    assert await backend.conversations.claim(5, 50) == []


async def test_a_late_extraction_never_completes_the_job_its_session_was_given_after_an_erasure(
    backend: Backend, clock: Clock
) -> None:
    # forget_all while the LLM answered, then the user talks on in the same session: the
    # session's new job has the same key, but the late answer's facts come from the erased
    # messages and must not be stored; the new message is extracted on its own.
    clock.at = T0
    await backend.conversations.observe(SESSION, CONTEXT, messages("my PIN is 4321"), extract_after_ms=0)
    (late,) = await backend.conversations.claim(5, 50)
    await backend.memories.erase_user("alice", actor="alice", include_group=True, usernames=[])
    await backend.conversations.observe(SESSION, CONTEXT, messages("I like tea", first=2), extract_after_ms=0)
    (job,) = await backend.conversations.claim(5, 50)  # the worker runs jobs side by side
    assert [m.content for m in job.messages] == ["I like tea"]
    with pytest.raises(ExtractionJobGone):
        await backend.conversations.store_facts(
            [fact("alice's PIN is 4321")], [None], scope=Scope("alice"), normalize=str.casefold, completes=late
        )
    assert await backend.memories.list(Scope("alice"), limit=10) == []
    await backend.conversations.store_facts(
        [fact("alice likes tea")], [None], scope=Scope("alice"), normalize=str.casefold, completes=job
    )
    assert [r.content for r in await backend.memories.list(Scope("alice"), limit=10)] == ["alice likes tea"]
    assert await backend.conversations.claim(5, 50) == []


async def test_facts_read_from_messages_erased_while_the_llm_answered_are_not_stored(backend: Backend) -> None:
    # memory.extract reads a window of the session, the LLM answers after forget_all: the facts
    # come from erased messages.  Facts from messages still stored are stored as usual.
    await backend.conversations.observe(
        SESSION, CONTEXT, messages("my PIN is 4321", "I like tea"), extract_after_ms=None
    )
    found = await backend.conversations.window(SESSION, "m2", 5)
    assert found is not None
    read = MessagesRead.of(*found)
    (stored,) = await backend.conversations.store_facts(
        [fact("alice likes tea")], [None], scope=Scope("alice"), normalize=str.casefold, read=read
    )
    assert stored.record is not None and not stored.refreshed
    await backend.memories.erase_user("alice", actor="alice", include_group=True, usernames=[])
    with pytest.raises(ExtractedMessagesGone):
        await backend.conversations.store_facts(
            [fact("alice's PIN is 4321")], [None], scope=Scope("alice"), normalize=str.casefold, read=read
        )
    assert await backend.memories.list(Scope("alice"), limit=10) == []
