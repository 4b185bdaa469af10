"""Search through ``MemoryStore.search``: within the caller's scopes and ash's disclosure rules,
with the query vector awaited, this_chat, about (people), and hidden vectors that never crowd
out visible ones."""

from __future__ import annotations

import numpy as np

from memoryd.store import PeopleFocus, Provenance, QueryVector, Scope
from memoryd.store.interfaces import Backend
from tests.contract.helpers import embed_all, note, unit

TEA = unit(1, 0.2)


def learned_in(chat_id: str, chat_type: str, **fields: object) -> Provenance:
    return Provenance(chat_type=chat_type, **fields)  # type: ignore[arg-type]


async def contents(backend: Backend, scope: Scope, query: str, vector: np.ndarray | None = None) -> set[str]:
    hits = await backend.memories.search(
        scope, query, limit=50, vector=None if vector is None else QueryVector.at_hand(vector)
    )
    return {hit.content for hit in hits}


async def test_keyword_and_vector_search_find_only_the_callers_scopes(backend: Backend) -> None:
    await backend.memories.add(note("alice drinks green tea", chat_id="c1"))
    await backend.memories.add(note("team tea on fridays", "carol", chat_id="c1", shared=True))
    await backend.memories.add(note("bob drinks green tea", "bob", chat_id="c1"))
    await backend.memories.add(note("other team tea", "carol", chat_id="c2", shared=True))
    await embed_all(backend, lambda content: TEA)
    scope = Scope("alice", "c1")
    expected = {"alice drinks green tea", "team tea on fridays"}
    assert await contents(backend, scope, "tea") == expected
    assert await contents(backend, scope, "", TEA) == expected
    assert await contents(backend, scope, "tea", TEA) == expected
    assert await contents(backend, Scope("alice"), "tea", TEA) == {"alice drinks green tea"}


async def test_a_private_chats_memories_never_reach_a_group_chat(backend: Backend) -> None:
    dm = Provenance(chat_type="private")
    group = Provenance(chat_type="group")
    await backend.memories.add(note("secret tea plan", chat_id="dm", provenance=dm))
    await backend.memories.add(note("public tea plan", chat_id="team", provenance=group))
    await backend.memories.add(
        note("sensitive tea plan", chat_id="dm", provenance=Provenance(chat_type="private", sensitivity="sensitive"))
    )
    await embed_all(backend, lambda content: TEA)
    in_group = Scope("alice", "team", "group")
    in_dm = Scope("alice", "dm", "private")
    for vector in (None, TEA):
        assert await contents(backend, in_group, "tea plan", vector) == {"public tea plan"}
        assert await contents(backend, in_dm, "tea plan", vector) == {
            "secret tea plan",
            "public tea plan",
            "sensitive tea plan",
        }
    listed = {r.content for r in await backend.memories.list(in_group, limit=50)}
    assert listed == {"public tea plan"}


async def test_this_chat_keeps_what_was_learned_in_the_current_chat(backend: Backend) -> None:
    await backend.memories.add(note("tea learned here", chat_id="c1", provenance=Provenance(chat_type="private")))
    await backend.memories.add(note("tea learned elsewhere", chat_id="c2", provenance=Provenance(chat_type="private")))
    await embed_all(backend, lambda content: TEA)
    here = Scope("alice", "c1", "private", this_chat=True)
    assert await contents(backend, here, "tea") == {"tea learned here"}
    assert await contents(backend, here, "", TEA) == {"tea learned here"}
    assert await contents(backend, Scope("alice", "c1", "private"), "tea") == {
        "tea learned here",
        "tea learned elsewhere",
    }


async def test_hidden_vectors_never_crowd_out_visible_ones(backend: Backend) -> None:
    # Many memories nearer the query than the caller's own, in scopes and chats it may not see.
    near, far = unit(1, 0.01), unit(0, 0, 1)
    backend.memories.add_many(
        note(f"crowd tea {i}", f"user{i % 7}", chat_id="other", shared=i % 3 == 0) for i in range(600)
    )
    backend.memories.add_many(
        note(f"private tea {i}", "alice", chat_id="dm", provenance=Provenance(chat_type="private")) for i in range(300)
    )
    await backend.memories.add(note("alices group tea", chat_id="team", provenance=Provenance(chat_type="group")))
    await backend.memories.add(
        note("team tea", "carol", chat_id="team", shared=True, provenance=Provenance(chat_type="group"))
    )
    await embed_all(backend, lambda content: far if content in ("alices group tea", "team tea") else near)
    hits = await backend.memories.search(Scope("alice", "team", "group"), "", limit=5, vector=QueryVector.at_hand(near))
    assert {hit.content for hit in hits} == {"alices group tea", "team tea"}


async def test_a_query_vector_under_way_is_awaited_and_a_failed_one_ranks_by_keywords(backend: Backend) -> None:
    await backend.memories.add(note("sailing on the lake"))
    await backend.memories.add(note("green tea"))
    await embed_all(backend, lambda content: unit(1) if "sailing" in content else unit(0, 1))
    awaited = []

    async def embedding() -> np.ndarray:
        awaited.append(True)
        return unit(1)

    hits = await backend.memories.search(Scope("alice"), "", limit=1, vector=QueryVector(embedding))
    assert [h.content for h in hits] == ["sailing on the lake"] and awaited

    async def failed() -> None:
        return None

    hits = await backend.memories.search(Scope("alice"), "tea", limit=5, vector=QueryVector(failed))
    assert [h.content for h in hits] == ["green tea"]


async def test_about_keeps_the_memories_about_a_person(backend: Backend) -> None:
    owner_names = ("alice",)
    for content in ("My wife Sarah loves jazz", "Sarah's birthday is in May", "I like tea"):
        record, _ = await backend.memories.add(note(content))
        await backend.people.learn("alice", record.id, content, [], owner_names, seen_by=Scope("alice"))
    sarah = await backend.people.find(Scope("alice"), "Sarah")
    assert sarah is not None
    about = await backend.memories.list(Scope("alice"), limit=10, about=[sarah.rowid])
    assert {r.content for r in about} == {"My wife Sarah loves jazz", "Sarah's birthday is in May"}
    focus = PeopleFocus(only=(sarah.rowid,), rest="jazz")
    hits = await backend.memories.search(Scope("alice"), "jazz", limit=5, people_focus=focus)
    assert hits[0].content == "My wife Sarah loves jazz"
    assert {h.content for h in hits} <= {"My wife Sarah loves jazz", "Sarah's birthday is in May"}
    assert {r.content for r in await backend.people.memories_about(Scope("alice"), sarah, limit=10)} == {
        "My wife Sarah loves jazz",
        "Sarah's birthday is in May",
    }


async def test_every_hit_carries_a_relevance_and_min_relevance_drops_the_hits_below_it(backend: Backend) -> None:
    await backend.memories.add(note("alice drinks green tea every morning"))
    await backend.memories.add(note("alice owns a red bicycle"))
    await backend.memories.add(note("alice parks on level three"))
    await embed_all(backend, lambda content: TEA if "tea" in content else unit(0, 0, 1, 0.3))
    scope, vector = Scope("alice"), QueryVector.at_hand(TEA)
    every = await backend.memories.search(scope, "green tea", limit=50, vector=vector)
    # The vector retriever reaches every memory of a scope this small, related or not.
    assert len(every) == 3
    assert all(0.0 <= hit.relevance <= 1.0 for hit in every)
    by_content = {hit.content: hit.relevance for hit in every}
    tea = by_content["alice drinks green tea every morning"]
    assert all(tea > relevance for content, relevance in by_content.items() if "tea" not in content)

    floor = (tea + max(r for c, r in by_content.items() if "tea" not in c)) / 2
    kept = await backend.memories.search(scope, "green tea", limit=50, vector=vector, min_relevance=floor)
    assert [hit.content for hit in kept] == [hit.content for hit in every if hit.relevance >= floor]
    assert [hit.content for hit in kept] == ["alice drinks green tea every morning"]
    assert await backend.memories.search(scope, "green tea", limit=50, vector=vector, min_relevance=1.0) == []


async def test_among_notes_the_closest_meaning_comes_first_and_a_specific_answers_where(backend: Backend) -> None:
    # Notes added one at a time (no memory asks anything), none sharing a word with the queries.
    query = unit(1)
    vectors = {
        "Usually beside the old fruit bowl": unit(0.60, 0.80),  # the closest, no specific in it
        "It lives in drawer 3 downstairs": unit(0.55, 0, 0.835),  # holds a number, 0.05 less close
        "Bought a new kettle last spring": unit(0.2, 0, 0, 0.98),
    }
    for content in vectors:
        await backend.memories.add(note(content))
    await embed_all(backend, vectors.__getitem__)
    scope = Scope("alice")

    async def first(text: str) -> str:
        hits = await backend.memories.search(scope, text, limit=5, vector=QueryVector.at_hand(query))
        return hits[0].content

    # A question asking for a place, a time or an amount prefers the memory holding one when the
    # two lie within ranking.SPECIFIC_BONUS in meaning; any other question takes the closest.
    assert await first("Where do I put the spare key?") == "It lives in drawer 3 downstairs"
    assert await first("What colour is the spare key?") == "Usually beside the old fruit bowl"
