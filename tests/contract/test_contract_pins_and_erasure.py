"""Pinning, the cap held at every add, erasing a user, and episodes, through the interfaces."""

from __future__ import annotations

from memoryd.store import QueryVector, Scope, SessionContext, SessionRef, StoredMessage
from memoryd.store.admin_records import ERASURE_KINDS
from memoryd.store.interfaces import Backend
from memoryd.store.supersession_records import Plan
from tests.contract.helpers import embed_all, note, unit
from tests.store_helpers import Clock

T0 = 1_700_000_000_000
DAY = 86_400_000
ALICE = Scope("alice")
DM = SessionRef("alice", "dm-alice", "s1")
PRIVATE = SessionContext(chat_type="private")


def said(*texts: str, author: str | None = None) -> list[StoredMessage]:
    return [StoredMessage(0, "user", text, f"m{i}", None, author, None, author) for i, text in enumerate(texts, 1)]


async def test_a_pinned_memory_is_marked_keeps_no_expiry_and_only_its_owner_can_pin_it(
    backend: Backend, clock: Clock
) -> None:
    clock.at = T0
    record, _ = await backend.memories.add(note("parking spot B12", expires_at_ms=T0 + DAY))
    assert not record.pinned
    assert await backend.memories.pin(Scope("bob"), record.id, pinned=True) is None  # not bob's to see
    pinned = await backend.memories.pin(ALICE, record.id[:8], pinned=True)
    assert pinned is not None and pinned.id == record.id and pinned.pinned and pinned.expires_at is None
    clock.at = T0 + 2 * DAY
    assert backend.maintenance.mark_expired() == 0
    assert [r.pinned for r in await backend.memories.list(ALICE, limit=5)] == [True]
    unpinned = await backend.memories.pin(ALICE, record.id, pinned=False)
    assert unpinned is not None and not unpinned.pinned and unpinned.expires_at is None


async def test_a_pinned_memory_is_still_found_by_meaning_after_the_expiry_it_had(
    backend: Backend, clock: Clock
) -> None:
    # The vector index filters on each memory's expiry; pinning clears it there too.
    clock.at = T0
    record, _ = await backend.memories.add(note("parking spot B12", expires_at_ms=T0 + DAY))
    assert await embed_all(backend, lambda _content: unit(1.0)) == 1
    assert await backend.memories.pin(ALICE, record.id, pinned=True) is not None
    clock.at = T0 + 2 * DAY
    hits = await backend.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(unit(1.0)))
    assert [hit.id for hit in hits] == [record.id]


async def test_every_add_holds_the_cap_and_never_evicts_a_pinned_memory(backend: Backend, clock: Clock) -> None:
    clock.at = T0
    first, _ = await backend.memories.add(note("the oldest, pinned"))
    assert await backend.memories.pin(ALICE, first.id, pinned=True) is not None
    backend.maintenance.set_caps(per_user=3, per_chat=0, protect_recent_ms=0)
    for i in range(5):
        clock.at = T0 + (i + 1) * DAY
        await backend.memories.add(note(f"remark number {i}"))
        # The cap holds after each add, not only after maintenance.
        assert len(await backend.memories.list(ALICE, limit=10)) <= 3
    kept = [r.content for r in await backend.memories.list(ALICE, limit=10)]
    assert len(kept) == 3 and "the oldest, pinned" in kept
    # Superseded versions go first; a fact added through supersession holds the cap too.
    old = await backend.supersession.add(ALICE, note("I live in Paris"), Plan())
    await backend.supersession.add(ALICE, note("I live in Berlin"), Plan(supersedes=old.record.id))
    kept = [r.content for r in await backend.memories.list(ALICE, limit=10)]
    assert len(kept) == 3 and "I live in Berlin" in kept and "the oldest, pinned" in kept
    # Episodes do not count towards the cap.
    await backend.conversations.observe(DM, PRIVATE, said("one", "two", "three"), extract_after_ms=None, episodes=True)
    assert len(await backend.memories.list(ALICE, limit=10)) == 3
    assert len(await backend.memories.list(ALICE, limit=10, types=["episode"])) == 3
    # No cap: adds evict nothing.
    backend.maintenance.set_caps(per_user=0, per_chat=0, protect_recent_ms=0)
    await backend.memories.add(note("a fourth one"))
    assert len(await backend.memories.list(ALICE, limit=10)) == 4


async def test_erasure_counts_what_it_removes_and_leaves_other_users_alone(backend: Backend, clock: Clock) -> None:
    clock.at = T0
    await backend.memories.add(note("alice likes tea"))
    gone, _ = await backend.memories.add(note("alice deleted this"))
    await backend.memories.delete(ALICE, gone.id)
    group, _ = await backend.memories.add(note("the team meets on mondays", chat_id="team", shared=True))
    await backend.memories.add(note("bob likes chess", "bob"))
    await backend.conversations.observe(DM, PRIVATE, said("hello", "bye"), extract_after_ms=None, episodes=True)
    dry = backend.maintenance.erase_user("alice", actor="operator", dry_run=True)
    assert set(dry) == set(ERASURE_KINDS)
    assert (dry["memories"], dry["episodes"], dry["group_memories_anonymised"], dry["messages"], dry["sessions"]) == (
        2, 2, 1, 2, 1,
    )  # fmt: skip
    assert len(await backend.memories.list(ALICE, limit=10)) == 1  # a dry run changes nothing
    counts = await backend.memories.erase_user("alice", actor="alice", include_group=False, usernames=())
    assert counts == dry
    assert await backend.memories.list(ALICE, limit=10) == []
    assert await backend.memories.list(ALICE, limit=10, types=["episode"]) == []
    assert await backend.conversations.session_messages(DM, 10) == []
    # The group memory stays with its chat, without its owner's name.
    kept = await backend.memories.get(Scope("carol", "team"), group.id)
    assert kept is not None and kept.owner != "alice" and kept.source_username is None
    assert [r.content for r in await backend.memories.list(Scope("bob"), limit=10)] == ["bob likes chess"]
    again = backend.maintenance.erase_user("alice", actor="operator", dry_run=True)
    assert (again["memories"], again["episodes"], again["messages"]) == (0, 0, 0)


async def test_episodes_are_the_observers_own_and_follow_the_disclosure_rules(backend: Backend, clock: Clock) -> None:
    clock.at = T0
    stored = await backend.conversations.observe(
        DM, PRIVATE, said("we adopted a greyhound called Biscuit"), extract_after_ms=None, episodes=True
    )
    assert stored == 1
    here = Scope("alice", "dm-alice", chat_type="private")
    hits = await backend.memories.search(here, "greyhound Biscuit", limit=5)
    assert [(h.memory_type, h.chat_id) for h in hits] == [("episode", "dm-alice")]
    assert await backend.memories.list(here, limit=5) == []  # list shows episodes only on request
    assert len(await backend.memories.list(here, limit=5, types=["episode"])) == 1
    assert await backend.memories.search(Scope("bob", "dm-alice"), "greyhound Biscuit", limit=5) == []
    # A private chat's episodes never reach a group chat.
    group = Scope("alice", "team", chat_type="group")
    assert await backend.memories.search(group, "greyhound Biscuit", limit=5) == []
    # Without episodes, observe stores the messages only.
    await backend.conversations.observe(
        SessionRef("alice", "dm-alice", "s2"), PRIVATE, said("a second greyhound"), extract_after_ms=None
    )
    assert len(await backend.memories.list(here, limit=5, types=["episode"])) == 1
    # A credential pasted into the chat is redacted in the episode (the searchable copy).
    key = "sk-" + "proj-" + "Xq7Lm2Nc9Vb4Tz8Rw1Ks6Jd3Hf5"
    await backend.conversations.observe(
        SessionRef("alice", "dm-alice", "s3"), PRIVATE, said(f"my deploy key is {key}"), extract_after_ms=None,
        episodes=True,
    )  # fmt: skip
    pasted = [r.content for r in await backend.memories.list(here, limit=5, types=["episode"]) if "deploy" in r.content]
    assert pasted == ["user: my deploy key is [redacted]"]
    clock.at = T0 + 100 * DAY
    assert backend.conversations.prune_episodes(retention_ms=90 * DAY) == 2
    assert await backend.memories.list(here, limit=5, types=["episode"]) == []


async def test_every_erasure_changes_the_erasure_mark_or_the_engine_notifies_instead(
    backend: Backend, backend_name: str
) -> None:
    """A daemon compares the mark to learn of an erasure another process made; an engine that
    notifies daemons itself (PostgreSQL) answers None and is never read."""
    await backend.memories.add(note("likes green tea"))
    before = await backend.people.erasure_mark()
    backend.maintenance.erase_user("alice", actor="operator", dry_run=True)
    assert await backend.people.erasure_mark() == before  # counting erases nothing
    backend.maintenance.erase_user("alice", actor="operator")
    first = await backend.people.erasure_mark()
    backend.maintenance.erase_user("bob", actor="operator")  # even one with nothing to erase
    second = await backend.people.erasure_mark()
    if backend_name == "postgres":
        assert before is first is second is None
    else:
        assert before is None and first is not None and second is not None and first != second
