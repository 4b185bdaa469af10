"""The search's fast paths give exactly what the plain computation gives: the keyword
retriever's probe before its joined query, and the ranking features read from arrays."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import apsw
import numpy as np
import pytest

from memoryd.ids import now_ms
from memoryd.store import Provenance, Scope, neighbourhood, ranking
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.db.database import open_connection
from memoryd.store.sqlite.search import keyword, neighbours, scope_stats
from memoryd.store.sqlite.search.term_match import term_weights
from tests.store_helpers import note, reading

ALICE = Scope("alice")
ALICE_IN_GROUP = Scope("alice", "chat-1", chat_type="group")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "memory.db", readers=2) as s:
        yield s


# -- keyword: probe the best matches, then the joined query ----------------------------------


async def add_tea_memories(store: Store, count: int, *, sensitive_every: int) -> list[str]:
    """``count`` memories holding "tea" (more often in some: BM25 scores differ), learned in the
    group chat-1, except every fifth (learned in a private chat) and every ``sensitive_every``-th
    (sensitive): both hidden from a group chat."""
    ids = []
    for i in range(count):
        words = " ".join(["tea"] * (1 + i % 4) + [f"filler{i}"] * (i % 7))
        learned = "private" if i % 5 == 1 else "group"
        provenance = Provenance(chat_type=learned, sensitivity="sensitive" if i % sensitive_every == 0 else None)
        record, _ = await store.memories.add(note(f"{words} note {i}", chat_id="chat-1", provenance=provenance))
        ids.append(record.id)
    return ids


def both_ways(store: Store, scope: Scope, depth: int, terms: list[str]) -> tuple[keyword.Ranked, keyword.Ranked]:
    with reading(store.path) as db:
        key = scope.visible_keys()[0]
        at = now_ms()
        fast = keyword.bm25_ranked(db, scope, key, terms, depth, at)
        plain = keyword.bm25_ranked(db, scope, key, terms, depth, at, probe_first=False)
        return fast, plain


@pytest.mark.parametrize("depth", [1, 3, 10, 20, 45, 200])
@pytest.mark.parametrize("scope", [ALICE, ALICE_IN_GROUP], ids=["private", "group chat"])
async def test_the_probe_ranks_exactly_as_the_joined_query(store: Store, depth: int, scope: Scope) -> None:
    ids = await add_tea_memories(store, 90, sensitive_every=3)
    # Deleted memories, and superseded ones, leave the ranking too.
    for memory_id in ids[1:40:5]:
        await store.memories.delete(ALICE, memory_id)
    fast, plain = both_ways(store, scope, depth, ["tea"])
    assert fast == plain
    assert len(plain) == min(depth, len(plain)) and plain


async def test_the_probe_falls_back_when_most_of_the_best_matches_are_hidden(store: Store) -> None:
    # Every memory but a few is sensitive: in a group chat the probe's best rows are nearly
    # all hidden, and the joined query must supply the rest.
    await add_tea_memories(store, 60, sensitive_every=1)
    for i in range(5):
        await store.memories.add(note(f"tea visible {i}", chat_id="chat-1", provenance=Provenance(chat_type="group")))
    fast, plain = both_ways(store, ALICE_IN_GROUP, 10, ["tea"])
    assert fast == plain
    assert len(plain) == 5


@pytest.mark.parametrize("others", [0, 30, 200], ids=["alone", "most of the table", "a minority"])
async def test_ranking_without_the_scope_token_gives_the_scoped_ranking(store: Store, others: int) -> None:
    # A scope holding most of the table ranks the terms' matches of every scope and keeps its
    # own (bm25 without the scope token's count): the scores and the order must not change.
    await add_tea_memories(store, 80, sensitive_every=7)
    for i in range(others):
        await store.memories.add(note(f"tea {'tea ' * (i % 3)}from someone else {i}", owner=f"user{i % 4}"))
    with reading(store.path) as db:
        share = scope_stats.share(db, "u:alice")
    assert (share >= keyword.WIDE_SHARE) == (others < 80)
    for depth in (1, 5, 20, 60):
        for terms in (["tea"], ["tea", "note", "filler3"], ["someone"]):
            fast, plain = both_ways(store, ALICE, depth, terms)
            assert fast == plain


async def test_the_probe_and_the_joined_query_agree_with_no_match(store: Store) -> None:
    await add_tea_memories(store, 5, sensitive_every=2)
    assert both_ways(store, ALICE, 10, ["coffee"]) == ([], [])


# -- ranking features: arrays over the neighbourhood == the plain loop -------------------------


class Facts(NamedTuple):
    coverage: float
    is_question: bool


def features_by_loop(
    rowids: list[int], cosines: dict[int, float], hood: neighbours.Neighbourhood, facts: dict[int, Facts]
) -> np.ndarray:
    """The features as the ranking model defines them, one candidate and one step at a time."""
    nothing = Facts(0.0, False)
    rows = []
    for rowid in rowids:
        own = facts[rowid]
        before, after = hood.walk(rowid, -1), hood.walk(rowid, 1)
        prev = facts[before] if before is not None else nothing
        next_ = facts[after] if after is not None else nothing
        window = max(
            facts[other].coverage if other is not None else 0.0
            for other in [hood.walk(rowid, step) for step in range(-ranking.WINDOW, ranking.WINDOW + 1)]
        )
        rows.append(
            [
                cosines.get(rowid, 0.0),
                own.coverage * (2 - own.coverage) if rowid in cosines else own.coverage,
                own.is_question,
                prev.is_question,
                prev.coverage,
                prev.coverage * prev.is_question,
                next_.coverage,
                window,
            ]
        )
    return np.array(rows, dtype=np.float64).reshape(len(rowids), len(ranking.FEATURES))


@pytest.mark.parametrize("seed", range(8))
def test_feature_table_matches_the_plain_loop(seed: int) -> None:
    rng = random.Random(seed)
    hood = neighbours.Neighbourhood()
    at = 0
    chain: list[neighbours.Row] = []
    for rowid in rng.sample(range(1, 10_000), 60):
        # Some gaps are too long to link: chains break, as between conversations.
        at += rng.choice([1000, 5000, neighbourhood.MAX_GAP_MS + 1])
        chain.append(neighbourhood.Row(rowid, f"text {rowid}" + rng.choice(["?", ".", "? (a photo)"]), at))
    for row in chain:
        hood.rows[row.rowid] = row
    for first, second in itertools.pairwise(chain):
        hood.link(first, second)
    facts = {row.rowid: Facts(rng.choice([0.0, 0.0, 0.3, 1.0]), ranking.is_question(row.text)) for row in chain}
    coverage_of = {row.text: facts[row.rowid].coverage for row in chain}
    table = ranking.FeatureTable(hood, coverage_of.__getitem__)
    candidates = rng.sample(list(hood.rows), 25)
    cosines = {rowid: rng.uniform(-0.2, 0.9) for rowid in rng.sample(candidates, 15)}
    assert np.array_equal(table.matrix(candidates, cosines), features_by_loop(candidates, cosines, hood, facts))
    assert table.matrix([], cosines).shape == (0, len(ranking.FEATURES))
    assert all(table.coverage(rowid) == facts[rowid].coverage for rowid in hood.rows)


# -- coverage: the substring pre-check never changes the result ------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_coverage_with_its_pre_check_matches_full_tokenization(seed: int) -> None:
    rng = random.Random(seed)
    vocabulary = ["played", "plays", "player", "violin", "violins", "happy", "happiness", "relational",
                  "relate", "cats", "cat", "caresses", "running", "run", "a1b2", "x_y", "emma's", "sarah",
                  "night", "nights", "shift", "nurse", "nursing", "toronto", "lives", "living"]  # fmt: skip
    separators = [" ", ", ", "_", "-", "'", "(", ") ", "\n", "?", "."]
    terms = rng.sample(["play", "violin", "happy", "cat", "run", "nurse", "living", "x", "emma"], 4)
    weights = term_weights(apsw.Connection(":memory:"), terms, {t: rng.randint(0, 9) for t in terms}, scope_docs=50)
    for _ in range(200):
        words = [rng.choice(vocabulary).upper() if rng.random() < 0.2 else rng.choice(vocabulary) for _ in range(8)]
        text = "".join(word + rng.choice(separators) for word in words)
        found = set(weights.tokens(text))
        expected = sum(w for token, w in weights.weights.items() if token in found) / weights.total
        assert weights.coverage(text) == expected, text


# -- scope statistics: cached per connection, never from another snapshot ---------------------


def fresh_counts(store: Store, terms: list[str]) -> tuple[dict[str, int], int]:
    with reading(store.path) as db:  # a new connection: nothing cached
        return scope_stats.measure(db, "u:alice", terms)


async def test_cached_counts_follow_commits_of_other_connections(store: Store) -> None:
    await add_tea_memories(store, 6, sensitive_every=100)
    terms = ["tea", "coffee", "note"]
    with reading(store.path) as db:
        first = scope_stats.measure(db, "u:alice", terms)
        assert first == fresh_counts(store, terms) == ({"tea": 6, "coffee": 0, "note": 6}, 6)
        assert scope_stats.measure(db, "u:alice", terms) == first  # served from the cache
        record, _ = await store.memories.add(note("coffee and tea"))
        assert scope_stats.measure(db, "u:alice", terms) == fresh_counts(store, terms) == (
            {"tea": 7, "coffee": 1, "note": 6}, 7,
        )  # fmt: skip
        await store.memories.delete(ALICE, record.id)
        assert scope_stats.measure(db, "u:alice", terms) == first


async def test_cached_counts_follow_the_connections_own_writes(store: Store) -> None:
    await add_tea_memories(store, 4, sensitive_every=100)
    db = open_connection(store.path, busy_timeout_ms=1000)
    try:
        assert scope_stats.measure(db, "u:alice", ["tea", "coffee"]) == ({"tea": 4, "coffee": 0}, 4)
        with db:
            db.execute("UPDATE memories SET deleted_at_ms = 1 WHERE rowid = (SELECT min(rowid) FROM memories)")
        assert scope_stats.measure(db, "u:alice", ["tea", "coffee"]) == ({"tea": 3, "coffee": 0}, 3)
    finally:
        db.close()


async def test_counts_read_in_a_transaction_belong_to_its_snapshot(store: Store) -> None:
    await add_tea_memories(store, 3, sensitive_every=100)
    with reading(store.path) as db:
        with db:  # one read snapshot, as a search runs
            before = scope_stats.measure(db, "u:alice", ["tea"])
            await store.memories.add(note("more tea"))
            assert scope_stats.measure(db, "u:alice", ["tea"]) == before == ({"tea": 3}, 3)
        assert scope_stats.measure(db, "u:alice", ["tea"]) == ({"tea": 4}, 4)
