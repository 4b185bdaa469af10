"""Questions worded unlike their answers: through the daemon's socket with the local model, each
question's fact ranks first among 60 memories (tests/data/paraphrase.json), but for at most one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
import pytest
import trio

from memoryd.store import query_terms
from tests.wire import NdjsonPeer, call_ok

DATA = json.loads((Path(__file__).parent / "data" / "paraphrase.json").read_text())
USER = {"user_id": "pat"}


def stems(text: str) -> set[str]:
    """The index tokens (porter, as memories_fts) of ``text``'s words, stopwords left out."""
    tokenize = apsw.Connection(":memory:").fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
    words = " ".join(query_terms.extract_terms(text))
    return set(tokenize(words.encode(), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False))


@pytest.mark.parametrize("item", DATA["questions"], ids=lambda item: item["question"])
def test_no_question_shares_a_content_word_with_its_fact(item: dict[str, Any]) -> None:
    # What makes the set a test of meaning: a keyword match cannot single out any of these facts
    # (a word listed as shared is in some distractor too, so it points at the wrong memory as well).
    allowed = stems(" ".join(item.get("shared", [])))
    assert stems(item["question"]) & stems(item["fact"]) <= allowed
    in_distractors = set().union(*(stems(d) for d in DATA["distractors"]))
    assert allowed <= in_distractors


def test_the_set_is_big_enough_to_mean_something() -> None:
    memories = [item["fact"] for item in DATA["questions"]] + DATA["distractors"]
    assert len(DATA["questions"]) >= 25 and len(set(memories)) >= 60


#: Questions whose fact may rank below another memory.  Among notes the order is the local
#: model's closeness in meaning (ranking.search_order), and a paraphrase can lie a hair closer to
#: another note: "What do I do for a living" is 0.458 from "My degree is in marine biology" and
#: 0.443 from the nurse's job.  On the larger fact set (bench/relevance.py) the same order puts the
#: right fact first for 0.912 of the questions, held out.
MISSES_ALLOWED = 1


async def test_paraphrased_questions_find_their_fact_first(local_peer: NdjsonPeer) -> None:
    peer = local_peer
    # Facts and distractors interleaved, as a life's notes come.
    facts = [item["fact"] for item in DATA["questions"]]
    memories = [m for pair in zip(facts, DATA["distractors"], strict=False) for m in pair]
    memories += DATA["distractors"][len(facts) :]
    with trio.fail_after(120):
        for content in memories:
            added = await call_ok(peer, "memory.add", {**USER, "content": content})
            assert added["embedded"] is True
        misses = []
        for item in DATA["questions"]:
            hits = await call_ok(peer, "memory.search", {**USER, "query": item["question"], "limit": 5})
            if hits[0]["content"] != item["fact"]:
                misses.append((item["question"], [hit["content"] for hit in hits[:3]]))
    assert len(misses) <= MISSES_ALLOWED, misses
