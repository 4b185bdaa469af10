"""What of a search's query the embedder reads: the query without its trailing question mark,
through the daemon to a real HTTP embedding backend on loopback; memories are embedded as
written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from memoryd.embed.query_form import embedded_form
from tests.fake_backends import FakeBackend
from tests.test_add_embedding import ALICE, ready_daemon
from tests.wire import call_ok


@pytest.mark.parametrize(
    ("query", "embedded"),
    [
        ("How do I like my morning brew?", "How do I like my morning brew"),
        ("  Where do I work ?? ", "Where do I work"),
        ("what's for dinner?!", "what's for dinner"),
        ("coffee order", "coffee order"),
        ("Is it 3.5?", "Is it 3.5"),
        ("¿Dónde vivo?", "¿Dónde vivo"),
        ("???", "???"),  # nothing else left: the query as it is
    ],
)
def test_the_embedded_form_drops_the_trailing_question_mark(query: str, embedded: str) -> None:
    assert embedded_form(query) == embedded


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    with FakeBackend("openai") as fake:
        yield fake


async def test_search_and_context_embed_the_query_without_its_question_mark(
    short_tmp: Path, nursery: trio.Nursery, backend: FakeBackend
) -> None:
    daemon, peer = await ready_daemon(short_tmp, backend, nursery)
    calls = len(backend.seen)
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "Should I take the train?"})
    assert added["embedded"] is True
    await call_ok(peer, "memory.search", {**ALICE, "query": "How do I get to work?", "min_relevance": 0})
    await call_ok(peer, "memory.context", {**ALICE, "message": "Which train do I take?"})
    inputs = [text for seen in backend.seen[calls:] for text in seen.body["input"]]
    # The memory as written; each query as embedded_form gives it.
    assert inputs == ["Should I take the train?", "How do I get to work", "Which train do I take"]
    daemon.request_stop()
