"""Store: hybrid search — safe keyword queries, fusion order, similarity, big scopes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memoryd.errors import EmbeddingModelMismatch
from memoryd.store import QueryVector, Scope, query_terms
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.search import keyword
from tests.store_helpers import embed_all as embed
from tests.store_helpers import keyword_found, note
from tests.store_helpers import unit as unit_of

DIM = 8
ALICE = Scope("alice")


def unit(*components: float) -> np.ndarray:
    return unit_of(DIM, *components)


HOSTILE = [
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "NEAR(tea coffee, 2)",
    "tea AND",
    "AND OR NOT",
    "*",
    "tea*",
    "^tea",
    '"',
    '""',
    '"tea',
    'tea""',
    "(",
    ")",
    "((tea)",
    "content:tea",
    "{content}: tea",
    "scope_token: x",
    "-tea",
    "+tea",
    "tea -coffee",
    "☕️🍵",
    "👩‍👩‍👧",
    "\U0001d531\U0001d522\U0001d51e",
    "\uff54\uff45\uff41",
    "thé",
    "\u0422\u0415\u0410 чай",
    "茶を飲む",
    "ሻይ",
    "\u200b\u200d",
    "a" * 5000,
    "tea " * 500,
    "'; DROP TABLE memories; --",
    "\\",
    "%_",
    "\t\n\r",
    "\ud800 tea",
    "",
]


@pytest.mark.parametrize("query", HOSTILE)
async def test_hostile_queries_never_error(store: Store, query: str) -> None:
    await store.memories.add(note("green tea and black coffee"))
    found = await keyword_found(store, query)
    terms = query_terms.extract_terms(query)
    if "tea" in terms:
        assert found == ["green tea and black coffee"]
    if not terms:
        assert found == []


def test_terms_are_folded_words_without_syntax() -> None:
    terms = query_terms.extract_terms('Thé AND "café" NEAR(x*) o\'clock')
    assert terms == ["cafe", "near", "x", "o", "clock"]  # stopwords go when other words remain
    assert query_terms.extract_terms("what is it") == ["what", "is", "it"]
    assert query_terms.extract_terms("☕ ***") == []
    assert query_terms.extract_terms("\uff54\uff45\uff41") == ["tea"]  # full-width
    assert len(query_terms.extract_terms(" ".join(f"w{i}" for i in range(100)))) == query_terms.MAX_TERMS


async def test_questions_do_not_match_on_their_stopwords_and_stems_match(store: Store) -> None:
    await store.memories.add(note("allergic to peanuts"))
    await store.memories.add(note("wife Sarah likes Italian food"))
    assert await keyword_found(store, "what does my wife like to eat?") == ["wife Sarah likes Italian food"]


async def test_diacritics_and_case_do_not_matter(store: Store) -> None:
    await store.memories.add(note("Meeting at the CAFÉ in São Paulo"))
    assert await keyword_found(store, "cafe sao") == ["Meeting at the CAFÉ in São Paulo"]


async def test_subjects_are_searchable(store: Store) -> None:
    await store.memories.add(note("prefers window seats", subjects=["travel"]))
    assert await keyword_found(store, "travel") == ["prefers window seats"]


async def test_keyword_only_similarity_is_the_fraction_of_query_terms_present(store: Store) -> None:
    await store.memories.add(note("green tea every morning"))
    [hit] = await store.memories.search(ALICE, "green tea evening walk", limit=5)
    assert hit.similarity == pytest.approx(0.5)
    assert 0.0 < hit.score < 1.0


async def test_with_vectors_similarity_is_the_cosine(store: Store) -> None:
    store.configure_vector_space("test:m", DIM)
    await store.memories.add(note("green tea every morning"))
    await embed(store, {"green tea every morning": unit(1, 1)})
    [hit] = await store.memories.search(ALICE, "green tea", limit=5, vector=QueryVector.at_hand(unit(1)))
    assert hit.similarity == pytest.approx(2**-0.5, abs=1e-3)


async def test_a_memory_found_by_both_retrievers_ranks_first(store: Store) -> None:
    store.configure_vector_space("test:m", DIM)
    contents = {"tea notes one": unit(0, 1), "tea and cake": unit(1, 0.1), "cake only": unit(1)}
    for content in contents:
        await store.memories.add(note(content))
    await embed(store, contents)
    hits = await store.memories.search(ALICE, "cake", limit=5, vector=QueryVector.at_hand(unit(1)))
    # "cake only": keyword #1 or #2 and vector #1; "tea and cake": both lists too.
    assert {hits[0].content, hits[1].content} == {"cake only", "tea and cake"}
    assert hits[-1].content == "tea notes one"
    # Among notes the closer meaning moves first and takes the score of the place it passes.
    assert hits[0].score >= hits[1].score > hits[2].score


async def test_no_terms_and_no_vector_finds_nothing(store: Store) -> None:
    await store.memories.add(note("anything"))
    assert await store.memories.search(ALICE, "!!! ...", limit=5) == []


async def test_memories_without_a_vector_yet_are_still_found_by_keyword(store: Store) -> None:
    store.configure_vector_space("test:m", DIM)
    await store.memories.add(note("pending embedding about sailing"))
    [hit] = await store.memories.search(ALICE, "sailing", limit=5, vector=QueryVector.at_hand(unit(1)))
    assert hit.similarity == pytest.approx(1.0)  # term fraction: no vector to compare


async def test_a_query_vector_of_another_dimension_degrades_to_keywords(store: Store) -> None:
    store.configure_vector_space("test:m", DIM)
    await store.memories.add(note("vectors everywhere"))
    await embed(store, {"vectors everywhere": unit(1)})
    hits = await store.memories.search(
        ALICE, "vectors", limit=5, vector=QueryVector.at_hand(np.ones(DIM + 1, dtype=np.float32))
    )
    assert [h.similarity for h in hits] == [1.0]  # the term fraction, not a cosine
    assert (
        await store.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(np.ones(DIM + 1, dtype=np.float32)))
        == []
    )


async def test_before_this_process_configured_a_space_search_is_keyword_only(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Store(path) as first:
        first.configure_vector_space("test:m", DIM)
        await first.memories.add(note("kept vectors"))
        await embed(first, {"kept vectors": unit(1)})
    with Store(path) as second:  # e.g. the configured model was refused as a mismatch
        assert await second.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(unit(1))) == []
        with pytest.raises(EmbeddingModelMismatch):
            second.configure_vector_space("other", DIM)
        assert await second.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(unit(1))) == []
        second.configure_vector_space("test:m", DIM)
        assert len(await second.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(unit(1)))) == 1


async def test_limit_caps_the_hits(store: Store) -> None:
    for i in range(12):
        await store.memories.add(note(f"tea note {i}"))
    assert len(await store.memories.search(ALICE, "tea", limit=5)) == 5


async def test_rare_terms_win_in_a_scope_where_other_terms_are_everywhere(store: Store) -> None:
    # More documents contain "common" than COMMON_DOCS: the planner drops it for the rare
    # term, and still fills up from recent common-term matches when the rare ones run out.
    store.memories.add_many(note(f"common filler {i}") for i in range(keyword.COMMON_DOCS + 50))
    await store.memories.add(note("common and rare words"))
    hits = await store.memories.search(ALICE, "common rare", limit=10)
    assert hits[0].content == "common and rare words"
    assert len(hits) == 10
    only_common = await store.memories.search(ALICE, "common", limit=10)
    assert len(only_common) == 10


async def test_own_old_memories_are_found_inside_a_huge_group_chat(store: Store) -> None:
    # The chat's flood of "common" matches is planned apart from alice's personal scope, so
    # her old memory is not cut off by the chat's recent-matches window.
    mine, _ = await store.memories.add(note("common personal thing"))
    store.memories.add_many(
        note(f"common chat filler {i}", "bob", chat_id="big", shared=True) for i in range(keyword.RECENT_WINDOW + 200)
    )
    hits = await store.memories.search(Scope("alice", "big"), "common", limit=50)
    assert len(hits) == 50
    assert mine.id in {h.id for h in hits}
