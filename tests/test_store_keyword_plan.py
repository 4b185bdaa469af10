"""Store: the keyword plan of a big scope gives what the exact plan gives, at the cost
of the matches instead of the scope."""

from __future__ import annotations

import pytest

from memoryd.store import Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.search import keyword
from tests.store_helpers import note

ALICE = Scope("alice")


@pytest.fixture
def big_scope(store: Store) -> Store:
    """alice: COMMON_DOCS + 100 memories holding "filler" (a common term), a few holding rare
    words; bob holds the same rare words, which alice must never get."""
    store.memories.add_many(note(f"filler number {i} of the pile") for i in range(keyword.COMMON_DOCS + 100))
    store.memories.add_many(
        [
            note("filler with a zebra"),
            note("zebra and quokka together"),
            note("a quokka alone in a long long long long sentence about quokka"),
            note("filler filler walrus"),
            note("zebra for bob", "bob"),
            note("quokka for bob", "bob"),
        ]
    )
    return store


async def ids(store: Store, scope: Scope, query: str, limit: int = 10) -> list[str]:
    return [hit.content for hit in await store.memories.search(scope, query, limit=limit)]


async def test_the_rare_terms_without_the_scope_token_rank_as_with_it(
    big_scope: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries = ["zebra filler", "quokka filler", "zebra quokka filler", "walrus filler pile"]
    fast = [await ids(big_scope, ALICE, q) for q in queries]
    monkeypatch.setattr(keyword, "WIDE_SHARE", 2.0)  # never leave the token out: the exact plan
    exact = [await ids(big_scope, ALICE, q) for q in queries]
    assert fast == exact
    assert all("bob" not in content for result in fast for content in result)
    assert fast[2][0] == "zebra and quokka together"


async def test_the_recent_window_prefers_memories_holding_more_of_the_query(big_scope: Store) -> None:
    # Both words are common in alice's scope; no rare term: the window ranks alone.
    hits = await ids(big_scope, ALICE, "filler pile", limit=5)
    assert len(hits) == 5
    assert all("filler" in h and "pile" in h for h in hits)


async def test_the_recent_window_keeps_hidden_memories_out(big_scope: Store) -> None:
    big_scope.memories.add_many(note(f"filler pile of bob {i}", "bob") for i in range(50))
    newest = await big_scope.memories.search(ALICE, "filler pile", limit=3)
    for hit in newest:
        await big_scope.memories.delete(ALICE, hit.id)
    after = await big_scope.memories.search(ALICE, "filler pile", limit=30)
    assert len({hit.id for hit in after}) == 30
    assert not {hit.id for hit in newest} & {hit.id for hit in after}
    assert all(hit.owner == "alice" for hit in after)


def test_a_term_in_every_memory_weighs_almost_nothing_and_never_less() -> None:
    # FTS5's IDF goes negative for a term in more than half the documents; its floor keeps a
    # common word from lowering a memory's score below one that lacks it.
    assert keyword.bm25_idf(1000, 1000) == keyword.bm25_idf(1000, 900) == 1e-6
    assert keyword.bm25_idf(1000, 1) > keyword.bm25_idf(1000, 10) > keyword.bm25_idf(1000, 400) > 1e-6
