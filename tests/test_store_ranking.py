"""The ranking model's parts: fixed tie order, the semantic guard, the spread over episodes,
scope-IDF coverage, conversation neighbours, the keyword planner's score floor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import numpy as np
import pytest

from memoryd.ids import now_ms
from memoryd.store import NewMemory, Provenance, QueryVector, Scope, neighbourhood, ranking
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.search import keyword, neighbours
from memoryd.store.sqlite.search.term_match import term_weights
from memoryd.store.term_match import idf
from tests.store_helpers import Clock, keyword_found, note, reading

DIM = 8
ALICE = Scope("alice")


def unit(*components: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(components)] = components
    return v / np.linalg.norm(v)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "memory.db", readers=2) as s:
        yield s


# -- order ---------------------------------------------------------------------------------


@pytest.mark.parametrize("listed", [[3, 1, 2], [1, 2, 3], [2, 3, 1]])
def test_equal_scores_rank_the_newer_memory_first_whatever_the_input_order(listed: list[int]) -> None:
    scored = {rowid: 0.5 for rowid in listed}
    assert [rowid for rowid, _ in ranking.order(scored, {})] == [3, 2, 1]


def test_a_clearly_closer_meaning_moves_above_a_keyword_match_and_takes_its_score() -> None:
    scored = {1: 0.9, 2: 0.4}  # 1: a shared word; 2: the better meaning
    cosines = {1: 0.13, 2: 0.43}
    assert ranking.order(scored, cosines) == [(2, 0.9), (1, 0.9)]


def test_the_guard_stops_at_a_candidate_nearly_as_close_in_meaning() -> None:
    scored = {1: 0.9, 2: 0.8, 3: 0.4}
    cosines = {1: 0.10, 2: 0.42, 3: 0.45}  # 2 is within SEMANTIC_MARGIN of 3, 1 is not
    assert [rowid for rowid, _ in ranking.order(scored, cosines)] == [1, 2, 3]
    cosines[1] = 0.5
    assert [rowid for rowid, _ in ranking.order(scored, cosines)] == [1, 2, 3]


def test_the_guard_needs_vectors() -> None:
    assert [rowid for rowid, _ in ranking.order({1: 0.2, 2: 0.7}, {})] == [2, 1]


def test_the_guard_is_off_when_asked_and_for_long_queries() -> None:
    scored, cosines = {1: 0.9, 2: 0.4}, {1: 0.13, 2: 0.43}
    assert [rowid for rowid, _ in ranking.order(scored, cosines, guard=False)] == [1, 2]
    assert ranking.guards(["living"]) and ranking.guards(["a", "b", "c"])
    assert not ranking.guards(["caroline", "support", "group", "may"])


def test_the_guard_covers_long_queries_among_candidates_that_show_no_exchange() -> None:
    terms = ["what", "sort", "car", "drive", "daily"]
    notes = np.zeros((3, len(ranking.FEATURES)))
    assert ranking.guards(terms, notes)
    turns = notes.copy()
    turns[1, ranking.FEATURES.index("is_question")] = 1.0
    assert not ranking.guards(terms, turns)
    replies = notes.copy()
    replies[2, ranking.FEATURES.index("prev_is_question")] = 1.0
    assert not ranking.guards(terms, replies)
    assert not ranking.guards(terms)


def test_among_notes_the_closest_meaning_comes_first_however_small_the_lead() -> None:
    notes = np.zeros((3, len(ranking.FEATURES)))
    scored = {1: 0.9, 2: 0.8, 3: 0.4}
    cosines = {1: 0.40, 2: 0.30, 3: 0.42}  # 3 leads by less than SEMANTIC_MARGIN
    texts = dict.fromkeys(scored, "some note")
    terms = ["which", "sort", "car", "drive", "daily"]
    ranked = ranking.search_order(scored, cosines, terms, notes, "Which sort of car do I drive daily?", texts)
    assert [rowid for rowid, _ in ranked] == [3, 1, 2]
    # Among an exchange the weights are trusted for a long query, and the margin holds for a short one.
    turns = notes.copy()
    turns[1, ranking.FEATURES.index("is_question")] = 1.0
    ranked = ranking.search_order(scored, cosines, terms, turns, "Which sort of car do I drive daily?", texts)
    assert [rowid for rowid, _ in ranked] == [1, 2, 3]
    assert [rowid for rowid, _ in ranking.search_order(scored, cosines, ["car"], turns, "car", texts)] == [1, 3, 2]


def test_among_notes_a_question_asking_for_a_specific_prefers_a_memory_holding_one() -> None:
    notes = np.zeros((2, len(ranking.FEATURES)))
    scored = {1: 0.5, 2: 0.5}
    cosines = {1: 0.33, 2: 0.32}
    texts = {1: "I played the piano as a child", 2: "Our daughter was born in 2019."}
    asked = ranking.search_order(scored, cosines, ["old", "kid"], notes, "How old is our kid?", texts)
    assert [rowid for rowid, _ in asked] == [2, 1]
    # Not a question for a specific: the meaning alone decides.
    plain = ranking.search_order(scored, cosines, ["kid", "like"], notes, "What does our kid like?", texts)
    assert [rowid for rowid, _ in plain] == [1, 2]
    # The bonus is less than a clear lead in meaning.
    cosines = {1: 0.33 + ranking.SPECIFIC_BONUS, 2: 0.22}
    asked = ranking.search_order(scored, cosines, ["old", "kid"], notes, "How old is our kid?", texts)
    assert [rowid for rowid, _ in asked] == [1, 2]


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("Who looks after my teeth?", True),
        ("where do we keep the spare key", True),
        ("When is my language class?", True),
        ("How many kids do I have?", True),
        ("How long have we lived here?", True),
        ("What's my spouse's name?", True),
        ("What do I do for a living?", False),
        ("How do I like my coffee?", False),
        ("Does my partner eat meat?", False),
        ("Tell me somewhere nice, and when it opens", False),
    ],
)
def test_which_queries_ask_for_a_specific(query: str, asks: bool) -> None:
    assert ranking.asks_specific(query) is asks


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        ("My parking spot is number 42", True),
        ("commute is the 17:42 train", True),
        ("My wife is called Priya", True),
        ("GP: Dr. Berg, Praxis am Markt", True),
        ("I'm allergic to shellfish.", False),
        ("Shellfish makes me ill. Nuts too.", False),  # capitalised only where a sentence starts
        ("Car: none, we use car sharing.", False),
        ("coffee black, and I take no sugar", False),  # "I" is no name
    ],
)
def test_which_texts_hold_a_specific(text: str, holds: bool) -> None:
    assert ranking.holds_specific(text) is holds


async def test_a_strong_semantic_match_beats_a_weak_keyword_match(store: Store) -> None:
    store.configure_vector_space("test:m", DIM)
    contents = {
        "My brother lives in Toronto": unit(0.1, 1),
        "I work night shifts as a nurse": unit(1, 0.2),
        "I am learning to play chess": unit(0, 0, 1),
    }
    for content in contents:
        await store.memories.add(note(content))
    claimed = await store.jobs.claim_embed(10)
    await store.jobs.complete_embed([(job, contents[job.content]) for job in claimed])
    hits = await store.memories.search(
        ALICE, "What do I do for a living?", limit=3, vector=QueryVector.at_hand(unit(1, 0.1))
    )
    assert hits[0].content == "I work night shifts as a nurse"
    assert hits[0].score >= hits[1].score


def test_is_question_reads_past_a_trailing_aside() -> None:
    assert ranking.is_question("Where did you go? (photo attached)")
    assert ranking.is_question("How was it?  ")
    assert not ranking.is_question("I went to Lyon (again?) and stayed")
    assert not ranking.is_question("I went to Lyon.")


# -- diversify: the top ten spread over episodes -------------------------------------------

FIRST = ranking.DIVERSE_FROM


def ranked_by_rowid(rowids: list[int]) -> list[tuple[int, float]]:
    """``rowids`` best first, with falling scores."""
    return [(rowid, 1.0 - place / 100) for place, rowid in enumerate(rowids)]


def test_places_after_the_first_go_to_episodes_not_shown_yet() -> None:
    one_exchange = list(range(1, 13))  # twelve memories added one after the other
    ranked = ranked_by_rowid([*one_exchange, 30, 31, 60])
    diverse = ranking.diversify(ranked, dict.fromkeys([*one_exchange, 30, 31, 60], 0))
    assert FIRST + 2 <= ranking.DIVERSE_UNTIL and ranking.DIVERSE_UNTIL < len(one_exchange)
    # 30 and 60 are more than EPISODE_ROWS from everything above them; 31 is 30's neighbour.
    assert [rowid for rowid, _ in diverse] == [*one_exchange[:FIRST], 30, 60, *one_exchange[FIRST:], 31]
    # Each place keeps its score: they still fall down the list.
    assert [score for _, score in diverse] == [score for _, score in ranked]


def test_memories_added_far_apart_in_time_are_other_episodes_even_with_close_rowids() -> None:
    rowids = list(range(1, 13))
    created = {rowid: 0 if rowid <= 8 else neighbourhood.MAX_GAP_MS + 1 for rowid in rowids}
    diverse = ranking.diversify(ranked_by_rowid(rowids), created)
    assert FIRST < 8 < ranking.DIVERSE_UNTIL
    # The rest of 1-8 is the first places' episode; 9 opens the later one, whose rest waits below.
    assert [rowid for rowid, _ in diverse] == [*rowids[:FIRST], 9, *rowids[FIRST:8], 10, 11, 12]


def test_a_candidate_without_a_creation_time_is_an_episode_of_its_own() -> None:
    rowids = list(range(1, 12))
    created = {rowid: 0 for rowid in rowids if rowid != 9}
    assert FIRST < 9
    assert [rowid for rowid, _ in ranking.diversify(ranked_by_rowid(rowids), created)] == [
        *rowids[:FIRST], 9, *rowids[FIRST:8], 10, 11
    ]  # fmt: skip


def test_short_lists_and_spread_out_lists_keep_the_models_order() -> None:
    short = ranked_by_rowid(list(range(1, FIRST + 1)))
    assert ranking.diversify(short, dict.fromkeys(range(1, FIRST + 1), 0)) == short
    apart = ranked_by_rowid([100 * i for i in range(1, 16)])
    assert ranking.diversify(apart, dict.fromkeys(range(100, 1600, 100), 0)) == apart


async def test_a_search_shows_an_older_episode_below_the_first_places(tmp_path: Path) -> None:
    clock = Clock(at=1_000_000)
    with Store(tmp_path / "memory.db", clock=clock) as store:
        older, _ = await store.memories.add(note("tea with my aunt in Kyoto"))
        clock.at += 24 * 3600 * 1000
        exchange = []
        for i in range(12):
            memory, _ = await store.memories.add(note(f"green tea tasting, cup {i}"))
            exchange.append(memory.id)
            clock.at += 1000
        hits = await store.memories.search(ALICE, "green tea", limit=15)
    ids = [hit.id for hit in hits]
    # "tea" alone scores below every "green tea" of the exchange; the first places stay the
    # exchange's, and the older memory takes the first place after them.
    assert set(ids[:FIRST]) <= set(exchange)
    assert ids[FIRST] == older.id
    assert set(ids[FIRST + 1 :]) == set(exchange) - set(ids[:FIRST])
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


# -- coverage ------------------------------------------------------------------------------


def test_idf_is_never_negative_and_falls_with_the_document_count() -> None:
    assert idf(0, 100) > idf(10, 100) > idf(100, 100) > 0.0
    assert idf(1000, 1000) >= 0.0
    assert idf(5, 0) >= 0.0  # a count above the (capped) scope size


def test_coverage_weighs_rare_terms_above_common_ones_and_matches_stems() -> None:
    db = apsw.Connection(":memory:")
    weights = term_weights(db, ["played", "violin"], {"played": 40, "violin": 1}, scope_docs=50)
    assert weights.coverage("She plays the VIOLIN") == pytest.approx(1.0)
    only_common = weights.coverage("we play chess")
    only_rare = weights.coverage("a violin")
    assert 0.0 < only_common < only_rare < 1.0
    assert only_common + only_rare == pytest.approx(1.0)
    assert weights.coverage("nothing in common") == 0.0
    assert weights.coverage("") == 0.0


def test_more_of_the_querys_words_never_lowers_a_memorys_score() -> None:
    # Coverage saturates (the first words count most) but never turns down: a memory holding
    # more of the query's words, all else equal, scores at least as high.
    coverage = np.linspace(0.0, 1.0, 101)
    saturated = ranking.saturated(coverage)
    assert saturated[0] == 0.0 and saturated[-1] == 1.0
    assert np.all(np.diff(saturated) > 0.0)
    assert np.all(np.diff(saturated, 2) < 0.0)  # the gains shrink
    rows = np.zeros((len(coverage), len(ranking.FEATURES)))
    rows[:, ranking.FEATURES.index("coverage")] = saturated
    rows[:, ranking.FEATURES.index("window_coverage")] = coverage
    assert np.all(np.diff(ranking.scores(rows)) > 0.0)


@pytest.mark.parametrize(
    "word",
    ["happy", "happiness", "ponies", "relational", "conditional", "sensibility", "hopping", "conflated",
     "generalization", "running", "agreed", "feed", "electricity", "hopefulness", "formality", "adjustable",
     "caresses", "cats", "motoring", "sized", "probate", "rate", "cease", "controlling", "roll"],
)  # fmt: skip
def test_the_substring_shortcut_never_hides_a_stem_match(word: str) -> None:
    # coverage() skips tokenizing an ASCII text lacking every token minus its last letter;
    # the word's own token must never be skipped that way.
    weights = term_weights(apsw.Connection(":memory:"), [word], {word: 1}, scope_docs=10)
    assert weights.coverage(f"some text with {word} inside") == pytest.approx(1.0)
    assert weights.coverage(f"{word.upper()}!") == pytest.approx(1.0)


def test_non_ascii_texts_are_always_tokenized() -> None:
    weights = term_weights(apsw.Connection(":memory:"), ["naive", "cafe"], {}, scope_docs=10)
    assert weights.coverage("Un café naïve") == pytest.approx(1.0)


# -- neighbours ----------------------------------------------------------------------------


def test_memories_added_far_apart_are_not_linked() -> None:
    hood = neighbourhood.Neighbourhood()
    a, b, c = (neighbourhood.Row(i, f"m{i}", at) for i, at in ((1, 0), (2, 1000), (3, neighbourhood.MAX_GAP_MS + 5000)))
    hood.link(a, b)
    hood.link(b, c)
    assert hood.walk(1, 1) == 2 and hood.walk(2, -1) == 1
    assert hood.walk(2, 1) is None and hood.walk(3, -1) is None
    assert hood.walk(1, 2) is None


async def test_neighbours_skip_deleted_memories_and_other_scopes(store: Store) -> None:
    first, _ = await store.memories.add(note("first"))
    await store.memories.add(
        NewMemory(content="bob's", owner="bob", chat_id=None, shared=False, source="t", subjects=[])
    )
    middle, _ = await store.memories.add(note("middle"))
    last, _ = await store.memories.add(note("last"))
    await store.memories.delete(ALICE, middle.id)

    def around(db: apsw.Connection) -> neighbours.Neighbourhood:
        (rowid,) = db.execute("SELECT rowid FROM memories WHERE id = ?", (first.id,)).fetchone()
        return neighbours.around(db, ALICE, [rowid], 3, now_ms())

    with reading(store.path) as db:
        hood = around(db)
    texts = [hood.rows[r].text for r in sorted(hood.rows)]
    assert texts == ["first", "last"]
    (first_rowid,) = [r for r in hood.rows if hood.rows[r].text == "first"]
    assert hood.rows[hood.walk(first_rowid, 1) or -1].text == "last"


async def test_a_neighbour_without_a_vector_or_a_query_word_is_not_returned(store: Store) -> None:
    await store.memories.add(note("green tea every morning"))
    await store.memories.add(note("allergic to peanuts"))
    assert await keyword_found(store, "tea") == ["green tea every morning"]


# -- the keyword planner's floor -----------------------------------------------------------


async def test_recent_window_hits_never_rank_above_rare_term_hits(store: Store) -> None:
    # "common" is in more than COMMON_DOCS memories: the rare term runs alone, and the newest
    # "common" matches fill up after it, each scored no better than the last rare-term hit.
    store.memories.add_many(note(f"common filler {i}") for i in range(keyword.COMMON_DOCS + 20))
    rare, _ = await store.memories.add(note("an old rare note"))

    def plan(db: apsw.Connection) -> list[int]:
        counts = keyword.term_counts(db, "u:alice", ["rare", "common"])
        assert counts == {"rare": 1, "common": keyword.COMMON_DOCS}
        return keyword.candidates(db, ALICE, ["rare", "common"], 10, now_ms(), [counts])

    with reading(store.path) as db:
        found = plan(db)
        (rare_rowid,) = db.execute("SELECT rowid FROM memories WHERE id = ?", (rare.id,)).fetchone()
    assert found[0] == rare_rowid and len(found) == 10


async def test_neighbours_hidden_from_the_callers_chat_never_shape_its_ranking(store: Store) -> None:
    # Learned in a group: visible from another group chat.  Learned in private right after it:
    # hidden from group chats, so it must not be its neighbour there (nor lend it its words).
    in_group = Scope("alice", chat_id="g2", chat_type="group")
    asked, _ = await store.memories.add(
        note("Did they sign it for a reason?", chat_id="g1", provenance=Provenance(chat_type="group"))
    )
    await store.memories.add(
        note("They signed it because of the lawsuit", chat_id="dm", provenance=Provenance(chat_type="private"))
    )
    answered, _ = await store.memories.add(
        note("They framed it afterwards", chat_id="g1", provenance=Provenance(chat_type="group"))
    )

    def around(db: apsw.Connection) -> neighbours.Neighbourhood:
        (rowid,) = db.execute("SELECT rowid FROM memories WHERE id = ?", (asked.id,)).fetchone()
        return neighbours.around(db, in_group, [rowid], 3, now_ms())

    with reading(store.path) as db:
        hood = around(db)
    texts = sorted(row.text for row in hood.rows.values())
    assert texts == sorted([asked.content, answered.content])
