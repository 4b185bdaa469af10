"""Store: a caller sees its personal memories plus its current chat's group memories, and
nothing else, in every retriever — and gets ALL of its own hits even in a crowded store."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import trio

from memoryd.errors import BrokenInvariant
from memoryd.store import NewMemory, QueryVector, Scope, visibility
from memoryd.store.sqlite import Store, visibility_sql
from tests.store_helpers import embed_all, note
from tests.store_helpers import unit as unit_of

DIM = 16
#: Well past the most candidates any retriever takes (vector_search.MAX_K, 4096 neighbours): a
#: search that took the nearest or best-matching rows store-wide and filtered them afterwards
#: would return none of bob's.
CROWD = 10_000


def unit(*components: float) -> np.ndarray:
    return unit_of(DIM, *components)


BOB_PERSONAL = [f"bob note {i}: oolong tea at the station" for i in range(3)]
BOB_GROUP = [f"team note {i}: tea with the team" for i in range(2)]
#: Far from the query direction: the crowd is much nearer, bob must still get his own.
BOB_VECTOR = unit(0, 0, 1)
CROWD_VECTOR = unit(1, 0.01)


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """Bob's 5 memories among 10k others' memories that match the same words better."""
    store = Store(tmp_path_factory.mktemp("crowd") / "memory.db", readers=2)
    store.configure_vector_space("test:crowd", DIM)
    store.memories.add_many(
        note(f"tea tea oolong station team {i}", f"user{i % 50}", chat_id="chat-other", shared=i % 5 == 0)
        for i in range(CROWD)
    )
    bob = [note(c, "bob", chat_id="chat-bob") for c in BOB_PERSONAL]
    bob += [note(c, "carol", chat_id="chat-bob", shared=True) for c in BOB_GROUP]
    store.memories.add_many(bob)
    trio.run(embed_all, store, {c: BOB_VECTOR for c in BOB_PERSONAL + BOB_GROUP}, CROWD_VECTOR)
    yield store
    store.close()


BOB = Scope("bob", "chat-bob")
EVERYTHING_OF_BOB = set(BOB_PERSONAL + BOB_GROUP)


async def test_keyword_search_finds_all_five_among_ten_thousand(crowded: Store) -> None:
    hits = await crowded.memories.search(BOB, "oolong tea station team", limit=10)
    assert {h.content for h in hits} == EVERYTHING_OF_BOB


async def test_vector_search_finds_all_five_although_the_crowd_is_nearer(crowded: Store) -> None:
    hits = await crowded.memories.search(BOB, "", limit=10, vector=QueryVector.at_hand(CROWD_VECTOR))
    assert {h.content for h in hits} == EVERYTHING_OF_BOB


async def test_hybrid_search_finds_all_five_and_nothing_else(crowded: Store) -> None:
    hits = await crowded.memories.search(BOB, "tea", limit=50, vector=QueryVector.at_hand(CROWD_VECTOR))
    assert {h.content for h in hits} == EVERYTHING_OF_BOB


async def test_without_the_chat_only_personal_memories_are_visible(crowded: Store) -> None:
    hits = await crowded.memories.search(Scope("bob"), "tea", limit=10, vector=QueryVector.at_hand(CROWD_VECTOR))
    assert {h.content for h in hits} == set(BOB_PERSONAL)
    listed = await crowded.memories.list(Scope("bob"), limit=100)
    assert {r.content for r in listed} == set(BOB_PERSONAL)


async def test_list_shows_all_five(crowded: Store) -> None:
    listed = await crowded.memories.list(BOB, limit=100)
    assert {r.content for r in listed} == EVERYTHING_OF_BOB


async def test_a_stranger_sees_nothing(crowded: Store) -> None:
    stranger = Scope("mallory", "chat-mallory")
    assert (
        await crowded.memories.search(stranger, "tea oolong", limit=10, vector=QueryVector.at_hand(CROWD_VECTOR)) == []
    )
    assert await crowded.memories.list(stranger, limit=10) == []


async def test_nobody_can_delete_or_resolve_what_they_cannot_see(crowded: Store) -> None:
    bobs = await crowded.memories.list(BOB, limit=100)
    target = bobs[0].id
    assert await crowded.memories.delete(Scope("mallory", "chat-mallory"), target) is None
    assert await crowded.memories.delete(Scope("mallory", "chat-mallory"), target[:12]) is None
    # A member of the crowd's chat sees 2k group memories, but not bob's.
    assert await crowded.memories.delete(Scope("user1", "chat-other"), target) is None
    assert {r.id for r in await crowded.memories.list(BOB, limit=100)} == {r.id for r in bobs}


# -- small, explicit cases for each retriever ----------------------------------------------------


@pytest.fixture
def store(store: Store) -> Iterator[Store]:
    store.configure_vector_space("test:small", DIM)
    yield store


async def seed(store: Store) -> dict[str, str]:
    def new(content: str, owner: str, chat_id: str, shared: bool) -> NewMemory:
        return NewMemory(content=content, owner=owner, chat_id=chat_id, shared=shared, source="t")

    rows = {
        "alice personal": new("alice personal tea", "alice", "c1", False),
        "c1 group": new("c1 group tea", "bob", "c1", True),
        "c2 group": new("c2 group tea", "alice", "c2", True),
        "bob personal": new("bob personal tea", "bob", "c1", False),
    }
    ids = {name: (await store.memories.add(new))[0].id for name, new in rows.items()}
    await embed_all(store, {}, unit(1))
    return ids


@pytest.mark.parametrize(
    ("scope", "visible"),
    [
        (Scope("alice", "c1"), {"alice personal", "c1 group"}),
        (Scope("alice", "c2"), {"alice personal", "c2 group"}),
        (Scope("alice"), {"alice personal"}),
        (Scope("bob", "c1"), {"bob personal", "c1 group"}),
        (Scope("bob", "c2"), {"bob personal", "c2 group"}),
        (Scope("carol", "c3"), set()),
    ],
)
async def test_every_retriever_applies_the_same_visibility(store: Store, scope: Scope, visible: set[str]) -> None:
    ids = await seed(store)
    names = {v: k for k, v in ids.items()}
    keyword = {names[h.id] for h in await store.memories.search(scope, "tea", limit=10)}
    vector = {
        names[h.id] for h in await store.memories.search(scope, "", limit=10, vector=QueryVector.at_hand(unit(1)))
    }
    listed = {names[r.id] for r in await store.memories.list(scope, limit=10)}
    assert keyword == vector == listed == visible
    for name, memory_id in ids.items():
        if name not in visible:
            assert await store.memories.delete(scope, memory_id) is None
    assert {names[r.id] for r in await store.memories.list(scope, limit=10)} == visible


async def test_group_memories_are_visible_to_every_member_of_the_chat(store: Store) -> None:
    ids = await seed(store)
    deleted = await store.memories.delete(Scope("alice", "c1"), ids["c1 group"])
    assert deleted == ids["c1 group"]
    assert ids["c1 group"] not in {r.id for r in await store.memories.list(Scope("bob", "c1"), limit=10)}


# -- the predicate every retriever is built from ---------------------------------------------------


def test_the_predicate_names_the_callers_keys_and_hides_deleted_superseded_and_expired() -> None:
    sql, params = visibility_sql.predicate(Scope("alice", "c1"), "m", now_ms=123)
    assert sql.startswith(
        "m.scope_key IN (?, ?) AND m.deleted_at_ms IS NULL AND m.superseded_by IS NULL "
        "AND (m.expires_at_ms IS NULL OR m.expires_at_ms > ?) AND "
    )
    # then the disclosure rules: not sensitive (the chat type is unknown), and not private to
    # another conversation, unless learned in this chat.
    assert sql.endswith("AND (m.disclosure IN (0, 1, 2) OR (m.chat_id = ? AND m.disclosure IN (0, 1, 2, 6, 7, 8)))")
    assert params == ("u:alice", "c:c1", 123, "c1")
    sql, params = visibility_sql.predicate(Scope("alice"), now_ms=5, include_expired=True, key="u:alice")
    assert (sql, params) == (
        "memories.scope_key = ? AND memories.deleted_at_ms IS NULL AND memories.superseded_by IS NULL "
        "AND (memories.disclosure IN (0, 1, 2))",
        ("u:alice",),
    )


def test_superseded_memories_show_when_the_scope_or_the_query_asks() -> None:
    everything = "memories.scope_key = ? AND memories.deleted_at_ms IS NULL AND (memories.disclosure IN (0, 1, 2))"
    by_scope = visibility_sql.predicate(Scope("alice", include_superseded=True), now_ms=5, include_expired=True)
    by_query = visibility_sql.predicate(Scope("alice"), now_ms=5, include_expired=True, include_superseded=True)
    assert by_scope[0].replace(" IN (?)", " = ?") == everything
    assert by_query[0].replace(" IN (?)", " = ?") == everything


def test_a_retriever_cannot_ask_for_a_key_its_caller_does_not_see() -> None:
    with pytest.raises(BrokenInvariant):
        visibility_sql.predicate(Scope("alice", "c1"), now_ms=0, key="c:c2")


def test_scope_keys_and_kinds_have_one_spelling() -> None:
    assert visibility.key_for(shared=False, owner="bob", chat_id="c1") == "u:bob"
    assert visibility.key_for(shared=True, owner="bob", chat_id="c1") == "c:c1"
    assert [visibility.kind_of_key(k) for k in ("u:bob", "c:c1")] == ["personal", "group"]
    with pytest.raises(BrokenInvariant):
        visibility.key_for(shared=True, owner="bob", chat_id=None)
