"""Relevance through the socket: the estimated chance that a memory helps, and its thresholds.

A daemon with the local model holds a handful of a person's facts.  A question one of them
answers, worded unlike it, finds it (search and context); a message none is about gets nothing
from memory.search and no memory from memory.context; the thresholds are checked the way a
caller meets them (bad values are -32602 naming the field, a zero threshold returns everything),
and the sandbox CLI says "No memories found." when nothing is relevant.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
import trio

from memoryd.config import Config, load_config
from memoryd.errors import ConfigError
from memoryd.server.daemon import Daemon
from memoryd.store import answer_kind, relevance
from memoryd_client import AsyncMemoryClient
from tests import test_cli_output
from tests.conftest import make_config
from tests.test_cli_output import Cli, out
from tests.wire import NdjsonPeer, call_error, call_ok

memory_pyz = test_cli_output.memory_pyz  # the zipapp fixture

USER = {"user_id": "rel"}
FACTS = [
    "I'm allergic to shellfish.",
    "My wife is called Sarah and we married in 2016.",
    "I work as a structural engineer at a bridge design firm.",
    "I drive a grey 2014 Honda Civic.",
    "I have Spanish lessons every Tuesday evening.",
    "My parking spot at the office is number 42 on level B.",
    "Sarah has been vegetarian since university.",
    "I take my coffee black with no sugar.",
]
UNRELATED = ["What is the capital of Mongolia?", "How do I reverse a linked list in Python?"]


async def seed(peer: NdjsonPeer) -> None:
    with trio.fail_after(120):
        for content in FACTS:
            assert (await call_ok(peer, "memory.add", {**USER, "content": content}))["embedded"] is True


@pytest.mark.parametrize("message", UNRELATED)
async def test_a_message_nothing_stored_is_about_gets_no_memories(local_peer: NdjsonPeer, message: str) -> None:
    await seed(local_peer)
    assert await call_ok(local_peer, "memory.search", {**USER, "query": message}) == []
    context = await call_ok(local_peer, "memory.context", {**USER, "message": message})
    assert context["memories"] == []
    assert "Relevant memories:" not in context["text"]
    # The query-level gate is what leaves them out: with no threshold, the same search returns
    # the store, none of it reaching the gate; any threshold above 0 brings the gate back.
    everything = await call_ok(local_peer, "memory.search", {**USER, "query": message, "min_relevance": 0})
    assert len(everything) == len(FACTS)
    assert all(0.0 <= hit["relevance"] < relevance.SEARCH_GATE for hit in everything)
    assert await call_ok(local_peer, "memory.search", {**USER, "query": message, "min_relevance": 1e-9}) == []


async def test_a_related_query_keeps_hits_below_the_gate_that_clear_the_floor(local_peer: NdjsonPeer) -> None:
    # The gate is decided once per query, on its best candidate; once a query clears it, each
    # hit only has to clear the (lower) per-hit floor.
    await seed(local_peer)
    query = "Does my wife eat meat?"
    hits = await call_ok(local_peer, "memory.search", {**USER, "query": query})
    everything = await call_ok(local_peer, "memory.search", {**USER, "query": query, "min_relevance": 0})
    assert hits[0]["content"] == "Sarah has been vegetarian since university."
    assert hits[0]["relevance"] >= relevance.SEARCH_GATE
    assert any(relevance.SEARCH_FLOOR <= hit["relevance"] < relevance.SEARCH_GATE for hit in hits), hits
    assert [hit["id"] for hit in hits] == [
        hit["id"] for hit in everything if hit["relevance"] >= relevance.SEARCH_FLOOR
    ]


async def test_a_paraphrased_question_finds_its_fact_in_search_and_context(local_peer: NdjsonPeer) -> None:
    await seed(local_peer)
    question = "Is there anything I can't eat at a seafood restaurant?"
    hits = await call_ok(local_peer, "memory.search", {**USER, "query": question})
    assert hits[0]["content"] == "I'm allergic to shellfish."
    scores = [hit["score"] for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= hit["relevance"] <= 1.0 for hit in hits)
    context = await call_ok(local_peer, "memory.context", {**USER, "message": question})
    assert "I'm allergic to shellfish." in [m["content"] for m in context["memories"]]
    assert "Relevant memories:\n- I'm allergic to shellfish." in context["text"]
    # The best clears the threshold and the rest reach a share of the best; a caller can ask
    # for a stricter threshold.
    best = max(m["relevance"] for m in context["memories"])
    assert best >= 0.15
    assert all(m["relevance"] >= relevance.CONTEXT_SHARE * best for m in context["memories"])
    stricter = await call_ok(
        local_peer, "memory.context", {**USER, "message": question, "min_relevance": hits[0]["relevance"]}
    )
    assert stricter["memories"][0]["content"] == "I'm allergic to shellfish."
    above = await call_ok(
        local_peer, "memory.context", {**USER, "message": question, "min_relevance": min(1.0, best + 1e-6)}
    )
    assert above["memories"] == []


async def test_min_relevance_is_a_threshold_on_the_hits_relevance(local_peer: NdjsonPeer) -> None:
    await seed(local_peer)
    query = "What's my spouse's name?"
    everything = await call_ok(local_peer, "memory.search", {**USER, "query": query, "min_relevance": 0})
    middle = sorted(hit["relevance"] for hit in everything)[len(everything) // 2]
    kept = await call_ok(local_peer, "memory.search", {**USER, "query": query, "min_relevance": middle})
    assert {hit["id"] for hit in kept} == {hit["id"] for hit in everything if hit["relevance"] >= middle}
    assert await call_ok(local_peer, "memory.search", {**USER, "query": query, "min_relevance": 1}) == []


@pytest.mark.parametrize("value", [-0.1, 1.5, "high"])
@pytest.mark.parametrize(("method", "text"), [("memory.search", "query"), ("memory.context", "message")])
async def test_min_relevance_outside_0_to_1_is_invalid_params_naming_it(
    peer: NdjsonPeer, method: str, text: str, value: Any
) -> None:
    error = await call_error(peer, method, {**USER, text: "coffee", "min_relevance": value})
    assert error["code"] == -32602
    assert error["data"]["field"] == "min_relevance"
    assert "min_relevance" in error["message"]


async def seeded_daemon(config: Config, nursery: trio.Nursery, embedder: Any) -> tuple[Daemon, NdjsonPeer]:
    """A daemon of ``config`` embedding with the local model, holding FACTS once ready."""
    daemon = Daemon(config, embedder=embedder)
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    with trio.fail_after(30):
        while not (await peer.call("system.health", {}))["result"]["embedder"]["vector_space_ready"]:
            await trio.sleep(0.02)
    await seed(peer)
    return daemon, peer


async def test_context_threshold_comes_from_the_config(
    short_tmp: Path, nursery: trio.Nursery, local_embedder: Any
) -> None:
    config = make_config(short_tmp, embedder="local", embed={"add_wait": 60.0})
    config = msgspec.structs.replace(config, context=msgspec.structs.replace(config.context, min_relevance=1.0))
    daemon, peer = await seeded_daemon(config, nursery, local_embedder)
    question = "Is there anything I can't eat at a seafood restaurant?"
    assert (await call_ok(peer, "memory.context", {**USER, "message": question}))["memories"] == []
    lower = await call_ok(peer, "memory.context", {**USER, "message": question, "min_relevance": 0.2})
    assert "I'm allergic to shellfish." in [m["content"] for m in lower["memories"]]
    daemon.request_stop()


@pytest.fixture
async def local_cli(
    memory_pyz: Path, short_tmp: Path, nursery: trio.Nursery, local_embedder: Any
) -> AsyncIterator[Cli]:
    config = make_config(short_tmp, embedder="local", embed={"add_wait": 60.0})
    daemon, _ = await seeded_daemon(config, nursery, local_embedder)
    yield Cli(memory_pyz, {"MEMORYD_SOCKET": str(config.socket_path), "MEMORY_USER_ID": USER["user_id"]})
    daemon.request_stop()


async def test_cli_says_no_memories_found_when_nothing_is_relevant(local_cli: Cli) -> None:
    assert out(await local_cli("search", UNRELATED[0])) == "No memories found.\n"
    # With no threshold the same query lists the store, sorted by the number it prints.
    lines = out(await local_cli("search", UNRELATED[0], "--min-relevance", "0")).splitlines()
    assert len(lines) == len(FACTS)
    numbers = [float(line[1:5]) for line in lines]
    assert numbers == sorted(numbers, reverse=True)


async def test_cli_shows_who_a_memory_is_about_without_subjects(local_cli: Cli) -> None:
    lines = out(await local_cli("search", "Does my wife eat meat?")).splitlines()
    assert any(line.endswith("Sarah has been vegetarian since university. (about Sarah) [agent]") for line in lines), (
        lines
    )


def test_standout_measures_each_cosine_against_the_best_others() -> None:
    cosines = np.array([0.6, 0.3, 0.3, 0.3, 0.3, 0.3, 0.0])
    stand = relevance.standout(cosines)
    assert stand[0] == pytest.approx(0.3)  # against the five 0.3s
    assert stand[1] == pytest.approx(0.3 - (0.6 + 4 * 0.3) / 5)  # against 0.6 and four 0.3s
    assert stand[6] == pytest.approx(0.0 - (0.6 + 4 * 0.3) / 5)
    # Fewer than PEERS others: the unrelated BACKGROUND stands in for the missing ones.
    assert relevance.standout(np.array([0.5]))[0] == pytest.approx(0.5 - relevance.BACKGROUND)


def test_relevance_is_a_probability_rising_with_the_evidence() -> None:
    rows = np.zeros((3, 8))
    rows[:, 0] = [0.1, 0.3, 0.6]  # cosine
    estimate = relevance.estimate(rows, np.ones(3, dtype=bool))
    assert np.all((estimate >= 0) & (estimate <= 1))
    assert estimate[2] > estimate[1] > estimate[0]
    words = np.zeros((2, 8))
    words[:, 1] = [0.2, 1.0]  # coverage, keyword-only
    words[:, 7] = [0.2, 1.0]  # window coverage
    keyword_only = relevance.estimate(words, np.zeros(2, dtype=bool))
    assert keyword_only[1] > keyword_only[0] > relevance.SEARCH_FLOOR


def test_the_context_threshold_is_a_config_key_with_an_env_var() -> None:
    assert load_config(flags={}, environ={}).context.min_relevance == 0.25
    assert load_config(flags={}, environ={"MEMORYD_CONTEXT_MIN_RELEVANCE": "0.5"}).context.min_relevance == 0.5
    with pytest.raises(ConfigError, match="context.min_relevance"):
        load_config(flags={}, environ={"MEMORYD_CONTEXT_MIN_RELEVANCE": "1.5"})


def test_no_candidates_no_relevance() -> None:
    assert relevance.estimate(np.zeros((0, 8)), np.zeros(0, dtype=bool)).shape == (0,)
    assert relevance.by_rowid([], np.zeros((0, 8)), {}) == {}


async def test_the_client_library_passes_min_relevance(
    short_tmp: Path, nursery: trio.Nursery, local_embedder: Any
) -> None:
    config = make_config(short_tmp, embedder="local", embed={"add_wait": 60.0})
    daemon, _ = await seeded_daemon(config, nursery, local_embedder)
    async with AsyncMemoryClient(config.socket_path, user_id=USER["user_id"]) as client:
        assert await client.search(UNRELATED[0]) == []
        assert len(await client.search(UNRELATED[0], min_relevance=0)) == len(FACTS)
        assert (await client.context(UNRELATED[0]))["memories"] == []
        assert len((await client.context(UNRELATED[0], limit=3, min_relevance=0))["memories"]) == 3
        assert (await client.context(UNRELATED[0]))["text"].startswith("About the user:")
        assert (await client.context(UNRELATED[0], include_summary=False))["text"] == ""
    daemon.request_stop()


def test_context_injects_nothing_below_the_threshold_and_then_what_reaches_a_share_of_the_best() -> None:
    assert relevance.for_context([], 0.15, 5) == []
    assert relevance.for_context([0.14, 0.1, 0.05], 0.15, 5) == []
    best = 0.6
    share = relevance.CONTEXT_SHARE * best
    values = [0.05, best, share, share - 0.01, 0.5]
    assert relevance.for_context(values, 0.15, 5) == [1, 2, 4]  # search order kept
    assert relevance.for_context(values, 0.15, 2) == [1, 2]
    assert relevance.for_context(values, best, 5) == [1, 2, 4]
    assert relevance.for_context(values, best + 0.01, 5) == []


def test_search_returns_nothing_unless_the_best_candidate_clears_the_gate() -> None:
    ranked = [(1, 3.0), (2, 2.0), (3, 1.0)]
    gate, floor = relevance.SEARCH_GATE, relevance.SEARCH_FLOOR
    weak = {1: gate * 0.9, 2: floor, 3: floor / 2}
    assert relevance.at_least(ranked, weak, floor) == []
    assert relevance.at_least(ranked, weak, 0.0) == ranked  # no threshold at all
    assert relevance.at_least(ranked, weak, floor, gate=0.0) == ranked[:2]  # the floor alone
    strong = {**weak, 2: gate}
    assert relevance.at_least(ranked, strong, floor) == ranked[:2]  # one clears it: the floor decides the rest
    # A threshold above the gate is its own gate.
    assert relevance.at_least(ranked, strong, gate * 2) == []
    assert relevance.query_gate(0.0) == 0.0
    assert relevance.query_gate(floor) == gate
    assert relevance.query_gate(0.5) == 0.5
    assert relevance.at_least(ranked, {}, floor) == []


async def test_context_leaves_out_memories_that_cannot_hold_the_number_or_time_asked_for(
    local_peer: NdjsonPeer,
) -> None:
    await seed(local_peer)
    # The coffee fact is on the topic, and relevant enough to inject, but holds no number.
    question = "How many cups of coffee do I drink a day?"
    hits = await call_ok(local_peer, "memory.search", {**USER, "query": question})
    assert hits[0]["content"] == "I take my coffee black with no sugar."
    assert hits[0]["relevance"] >= 0.15
    context = await call_ok(local_peer, "memory.context", {**USER, "message": question})
    assert context["memories"] == []
    assert "Relevant memories:" not in context["text"]
    # With no threshold at all, nothing is checked.
    everything = await call_ok(local_peer, "memory.context", {**USER, "message": question, "min_relevance": 0})
    assert everything["memories"]
    # A question asking for a time that its fact holds still gets it.
    when = await call_ok(local_peer, "memory.context", {**USER, "message": "When is my language class?"})
    assert "I have Spanish lessons every Tuesday evening." in [m["content"] for m in when["memories"]]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When is my dentist appointment?", "time"),
        ("what time does the shop open", "time"),
        ("Which year did we move?", "time"),
        ("How many children do I have?", "number"),
        ("How much is my rent?", "number"),
        ("What's my shoe size?", "number"),
        ("What is my  student ID number?", "number"),
        ("What's my spouse's name?", None),
        ("Where do I live?", None),
        ("Do I like coffee?", None),
    ],
)
def test_what_kind_of_answer_a_question_asks_for(question: str, kind: str | None) -> None:
    assert answer_kind.asks_for(question) == kind


def test_whether_a_memory_can_hold_a_number_or_a_time() -> None:
    assert answer_kind.holds("Rent is 1450 a month.", "number")
    assert answer_kind.holds("We have twin boys who just turned eight.", "number")
    assert not answer_kind.holds("My student loan covers rent but not much else.", "number")
    assert answer_kind.holds("Spanish lessons every Tuesday evening.", "time")
    assert answer_kind.holds("bday 30/7", "time")
    assert not answer_kind.holds("I am terrified of flying.", "time")
    # Only a question asking for one of the two kinds is checked, against any of the texts.
    assert answer_kind.can_answer("Where do I live?", [])
    assert not answer_kind.can_answer("How much is my rent?", ["My loan covers rent.", "I live in Leeds."])
    assert answer_kind.can_answer("How much is my rent?", ["My loan covers rent.", "Rent: 900 a month."])


def test_a_time_may_be_written_in_words() -> None:
    assert answer_kind.holds("My alarm rings at half past five", "time")
    assert answer_kind.holds("I was born on the third of March", "time")


async def test_a_context_threshold_below_the_search_gate_is_the_context_own(local_peer: NdjsonPeer) -> None:
    # memory.context decides with its own threshold: a caller asking for a threshold below the
    # search's gate gets what reaches it, not the search's query-level decision.
    await seed(local_peer)
    message = UNRELATED[0]
    everything = await call_ok(local_peer, "memory.search", {**USER, "query": message, "min_relevance": 0})
    best = max(hit["relevance"] for hit in everything)
    assert 0.0 < best < relevance.SEARCH_GATE
    low = await call_ok(local_peer, "memory.context", {**USER, "message": message, "min_relevance": best})
    assert best in [m["relevance"] for m in low["memories"]]
    above = await call_ok(local_peer, "memory.context", {**USER, "message": message, "min_relevance": best * 1.01})
    assert above["memories"] == []
