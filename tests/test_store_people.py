"""The people tables and the people retriever, below the service: learning, links, ranking,
another owner's people, and links that follow deletes, merges and gc."""

from __future__ import annotations

import apsw

from memoryd.ids import DAY_MS, now_ms
from memoryd.store import NewMemory, PeopleFocus, Scope
from memoryd.store.sqlite import Store
from tests.store_helpers import Clock

ALICE = Scope("alice")


async def remember(
    store: Store,
    content: str,
    owner: str = "alice",
    subjects: list[str] | None = None,
    chat_id: str | None = None,
    shared: bool = False,
) -> str:
    record, _ = await store.memories.add(NewMemory(content, owner, chat_id, shared, "t", subjects=subjects or []))
    await store.people.learn(owner, record.id, record.content, record.subjects, [owner])
    return record.id


async def test_learning_creates_merges_and_links(store: Store) -> None:
    wife = await remember(store, "My wife's name is Sarah")
    again = await remember(store, "My wife's name is Sara")  # a one-at-a-time relationship: merged
    food = await remember(store, "sarah likes Italian food")
    plain = await remember(store, "I like tea")
    (sarah,) = await store.people.people_of("alice")
    assert (sarah.name, sarah.relationship) == ("Sarah", "wife")
    assert sarah.aliases == ["my wife", "Sara"]
    about = await store.people.memories_about(ALICE, sarah, limit=10)
    assert [r.id for r in about] == [food, again, wife]  # newest first
    assert all(r.about == ["Sarah"] for r in about)
    assert plain not in {r.id for r in about}


async def test_the_owner_and_unnamed_relationships_make_nobody(store: Store) -> None:
    await remember(store, "alice likes tea", subjects=["alice", "I", "my mother"])
    await remember(store, "My mother is Italian")  # a nationality, not a name
    assert await store.people.people_of("alice") == []


async def test_people_belong_to_their_owner(store: Store) -> None:
    group = await remember(store, "Sarah is my wife", chat_id="c1", shared=True)
    await remember(store, "Sarah is my sister", owner="bob")
    alices, bobs = await store.people.people_of("alice"), await store.people.people_of("bob")
    assert [p.relationship for p in alices] == ["wife"] and [p.relationship for p in bobs] == ["sister"]
    assert await store.people.find(Scope("bob"), alices[0].id) is None
    # bob sees the group memory, but it is about alice's Sarah: not named for him.
    (hit,) = await store.memories.search(Scope("bob", "c1"), "wife", limit=5)
    assert hit.id == group and hit.about == []
    (hit,) = await store.memories.search(Scope("alice", "c1"), "wife", limit=5)
    assert hit.about == ["Sarah"]


async def test_the_people_retriever_ranks_by_the_rest_of_the_query(store: Store) -> None:
    await remember(store, "Sarah is my wife")
    likes = await remember(store, "Sarah likes Italian food")
    for i in range(5):
        await remember(store, f"Sarah went to the dentist, visit {i}")
    (sarah,) = await store.people.people_of("alice")
    focus = PeopleFocus(mentioned=(sarah.rowid,), rest="what does  like?")
    hits = await store.memories.search(ALICE, "what does Sarah like?", limit=3, people_focus=focus)
    assert hits[0].id == likes
    # Found through the person alone, though the query shares no word with the memory.
    focus = PeopleFocus(mentioned=(sarah.rowid,), rest="italian")
    hits = await store.memories.search(ALICE, "zzz italian", limit=1, people_focus=focus)
    assert [h.id for h in hits] == [likes]


async def test_an_about_filter_that_names_nobody_answers_nothing(store: Store) -> None:
    await remember(store, "Sarah is my wife")
    focus = PeopleFocus(only=())
    assert await store.memories.search(ALICE, "wife", limit=5, people_focus=focus) == []
    assert await store.memories.list(ALICE, limit=5, about=()) == []


async def test_links_follow_merge_delete_and_gc(tmp_path: object, clock: Clock) -> None:
    from pathlib import Path

    with Store(Path(str(tmp_path)) / "m.db", readers=1, clock=clock) as store:
        chess = await remember(store, "Bobby likes chess", subjects=["Bobby"])
        await remember(store, "Robert is my brother")
        merge = await store.people.merge(Scope("alice"), "Bobby", "my brother")
        assert merge.merged is not None and merge.merged.aliases == ["my brother", "Bobby"]
        (robert,) = await store.people.people_of("alice")
        assert len(await store.people.memories_about(ALICE, robert, limit=10)) == 2
        assert await store.memories.delete(ALICE, chess) == chess
        assert [r.content for r in await store.people.memories_about(ALICE, robert, limit=10)] == [
            "Robert is my brother"
        ]
        clock.at = now_ms() + 400 * DAY_MS
        store.lifecycle.gc(retention_ms=30 * DAY_MS)
        assert (await store.people.counts(ALICE, [robert])) == {robert.id: 1}
        # The purged memory's link went with it (ON DELETE CASCADE), not just out of sight.
        links = apsw.Connection(str(Path(str(tmp_path)) / "m.db")).execute("SELECT count(*) FROM memory_people")
        assert links.fetchall() == [(1,)]
