"""A query made only of symbols (an emoji, "€") finds the memories holding its text, through the
socket on both engines and without an embedder, inside the caller's scope only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.server.daemon import Daemon
from memoryd.store import symbol_match
from tests.conftest import make_config
from tests.wire import NdjsonPeer, call_ok


@pytest.fixture(params=["sqlite", "postgres"])
async def peer(request: pytest.FixtureRequest, short_tmp: Path, nursery: trio.Nursery) -> AsyncIterator[NdjsonPeer]:
    """A keyword-only daemon (embedder none) on each engine."""
    storage: dict[str, Any] = {}
    if request.param == "postgres":
        pytest.importorskip("psycopg")
        from tests.postgres_server import shared

        storage = {"storage": {"backend": "postgres", "url": shared().fresh_database()}}
    daemon = Daemon(make_config(short_tmp, **storage))
    await nursery.start(daemon.run)
    yield await NdjsonPeer.connect(daemon.config.socket_path)
    daemon.request_stop()


async def add(peer: NdjsonPeer, user: str, content: str, **params: Any) -> str:
    added = await call_ok(peer, "memory.add", {"user_id": user, "content": content, **params})
    return str(added["id"])


async def search(peer: NdjsonPeer, user: str, query: str, **params: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = await call_ok(peer, "memory.search", {"user_id": user, "query": query, **params})
    return found


async def context(peer: NdjsonPeer, user: str, message: str, **params: Any) -> list[str]:
    built = await call_ok(peer, "memory.context", {"user_id": user, "message": message, **params})
    return [memory["content"] for memory in built["memories"]]


@pytest.mark.parametrize("symbol", ["🎸", "€", "¯\\_(ツ)_/¯"[:2], "->"])
async def test_a_symbol_query_finds_the_memory_holding_it_without_an_embedder(peer: NdjsonPeer, symbol: str) -> None:
    mine = await add(peer, "alice", f"The band's logo is {symbol} on a black shirt")
    await add(peer, "alice", "I walk the dog every morning")
    found = await search(peer, "alice", f" {symbol} ")
    assert [hit["id"] for hit in found] == [mine]
    assert found[0]["relevance"] == symbol_match.RELEVANCE
    assert found[0]["similarity"] == 1.0  # it holds the whole query
    # A message made only of symbols (a reaction) injects nothing by default; a caller asking
    # for it gets the memory holding it.
    assert await context(peer, "alice", symbol) == []
    wanted = await context(peer, "alice", symbol, min_relevance=symbol_match.RELEVANCE)
    assert wanted == [f"The band's logo is {symbol} on a black shirt"]


async def test_a_symbol_query_sees_what_a_word_query_sees_and_nothing_else(peer: NdjsonPeer) -> None:
    """Each memory holds the word "guitar" and the symbol: wherever the caller stands, the symbol
    finds exactly what the word finds (the keyword retriever's visibility rules)."""
    bobs = await add(peer, "bob", "Bob's favourite guitar 🎸")
    g2 = await add(peer, "alice", "Group plan guitar 🎸 in g2", chat_id="g2", shared=True)
    p1 = await add(peer, "alice", "Private note guitar 🎸 from p1", chat_id="p1", chat_type="private")
    g1 = await add(peer, "alice", "Group plan guitar 🎸 in g1", chat_id="g1", shared=True)
    mine = await add(peer, "alice", "Alice's own guitar 🎸")
    places: list[dict[str, Any]] = [
        {},
        {"chat_id": "g1"},
        {"chat_id": "g1", "chat_type": "group"},
        {"chat_id": "p1", "chat_type": "private"},
        {"chat_id": "g2", "chat_type": "group"},
        {"chat_id": "p1", "this_chat": True},
        {"include_superseded": True},
    ]
    for user in ("alice", "bob", "carol"):
        for place in places:
            by_symbol = {hit["id"] for hit in await search(peer, user, "🎸", **place)}
            assert by_symbol == {hit["id"] for hit in await search(peer, user, "guitar", **place)}, (user, place)
            if user != "bob":
                assert bobs not in by_symbol
    # Alone: her personal memories; in group g1: that group's alone (a private chat's never).
    assert {hit["id"] for hit in await search(peer, "alice", "🎸")} == {mine, p1}
    assert {hit["id"] for hit in await search(peer, "alice", "🎸", chat_id="g1", chat_type="group")} == {g1}
    assert g2 not in {hit["id"] for hit in await search(peer, "alice", "🎸", chat_id="g1")}
    assert {hit["id"] for hit in await search(peer, "bob", "🎸")} == {bobs}
    assert await search(peer, "carol", "🎸") == []


async def test_an_unrelated_symbol_query_finds_nothing(peer: NdjsonPeer) -> None:
    await add(peer, "alice", "The band's logo is 🎸 on a black shirt")
    await add(peer, "alice", "Prices are in €")
    assert await search(peer, "alice", "🎹") == []
    assert await search(peer, "alice", "$") == []
    assert await context(peer, "alice", "🎹") == []


async def test_symbol_hits_come_newest_first_and_min_relevance_still_applies(peer: NdjsonPeer) -> None:
    older = await add(peer, "alice", "First gig ★")
    newer = await add(peer, "alice", "Second gig ★★")
    assert [hit["id"] for hit in await search(peer, "alice", "★")] == [newer, older]
    assert [hit["id"] for hit in await search(peer, "alice", "★★")] == [newer]
    assert await search(peer, "alice", "★", min_relevance=0.9) == []


async def test_with_the_local_model_a_symbol_query_ranks_the_memories_holding_it_first(local_peer: NdjsonPeer) -> None:
    """The vectors still offer their matches (the model reads most emoji as one unknown token,
    so 🎹 and 🎸 look alike to it); the memory holding the symbol comes first, as relevant as
    without them."""
    for content in ("I walk the dog every morning", "The band's logo is 🎸 on a black shirt", "I play guitar"):
        await add(local_peer, "alice", content)
    found = await search(local_peer, "alice", "🎸")
    assert found[0]["content"] == "The band's logo is 🎸 on a black shirt"
    assert found[0]["relevance"] >= symbol_match.RELEVANCE
    wanted = await context(local_peer, "alice", "🎸", min_relevance=symbol_match.RELEVANCE)
    assert wanted == ["The band's logo is 🎸 on a black shirt"]
    assert all(hit["relevance"] < symbol_match.RELEVANCE for hit in await search(local_peer, "alice", "🎹"))
