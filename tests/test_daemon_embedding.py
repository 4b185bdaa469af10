"""Embeddings through the daemon: hybrid search with the local model, backends that fail, reindex."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from memoryd.embed import CoalescingEmbedder
from memoryd.errors import StartupError
from memoryd.server.daemon import Daemon
from memoryd.store.sqlite import Store
from tests.conftest import make_config
from tests.fake_backends import FakeBackend, Reply
from tests.wire import NdjsonPeer, call_ok, drained

ALICE = {"user_id": "alice"}


@pytest.fixture
def openai_backend() -> Iterator[FakeBackend]:
    with FakeBackend("openai") as backend:
        yield backend


def openai_config(base: Path, backend_url: str, **embed: Any) -> Any:
    settings = {"url": backend_url, "model": "fake-embed", "timeout": 0.5, "retries": 0, "add_wait": 1.0, **embed}
    return make_config(base, embedder="openai", embed=settings)


async def wait_vector_space_ready(peer: NdjsonPeer) -> None:
    """Until the backend's dimension is known (the daemon's probe went through)."""
    with trio.fail_after(10):
        while not (await call_ok(peer, "system.health", {}))["embedder"]["vector_space_ready"]:
            await trio.sleep(0.02)


async def test_local_model_finds_memories_by_meaning(local_peer: NdjsonPeer) -> None:
    peer = local_peer
    facts = ["allergic to peanuts", "wife Sarah likes Italian food", "works as a nurse on night shifts"]
    for fact in facts:
        added = await call_ok(peer, "memory.add", {**ALICE, "content": fact})
        assert added["embedded"] is True
    # No keyword in common with the best answer: only the vector retriever can find it.
    # (No relevance floor: the unrelated facts are returned too, below it.)
    query = {**ALICE, "query": "which cuisine does his spouse enjoy?", "min_relevance": 0}
    hits = await call_ok(peer, "memory.search", query)
    assert len(hits) == len(facts)
    assert hits[0]["content"] == "wife Sarah likes Italian food"
    assert hits[0]["similarity"] > hits[-1]["similarity"]
    assert all(0.0 <= hit["similarity"] <= 1.0 for hit in hits)
    health = await call_ok(peer, "system.health", {})
    assert health["embedder"]["model"] if "model" in health["embedder"] else health["embedder"]
    # Which encoder runs the model: onnxruntime is a dependency, numpy only its fallback.
    assert health["embedder"]["runtime"].startswith("onnxruntime ")
    assert health["backlog"].get("embed", 0) == 0
    # The query started at once on the idle model's own thread (beside its keyword part).
    assert health["embedder"]["coalescing"]["queries_at_once"] == 1


class StalledQueries(CoalescingEmbedder):
    """The session's local model (forwarded as the coalescer forwards it while not running),
    except that a query started at once never finishes: a stuck model thread."""

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self.started = 0

    async def aclose(self) -> None:
        return None  # the session's model stays loaded for the other tests

    def embed_query_now(self, text: str) -> Future[Any]:
        self.started += 1
        return Future()  # nobody ever sets it


async def stalled_daemon(
    base: Path, nursery: trio.Nursery, model: Any, facts: tuple[str, ...] = (), **config: Any
) -> tuple[NdjsonPeer, StalledQueries]:
    stalled = StalledQueries(model)
    daemon = Daemon(make_config(base, embedder="local", **config), embedder=stalled)
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await wait_vector_space_ready(peer)
    for fact in facts:
        assert (await call_ok(peer, "memory.add", {**ALICE, "content": fact}))["embedded"] is True
    return peer, stalled


async def test_a_query_started_at_once_past_query_timeout_leaves_a_keyword_search(
    short_tmp: Path, nursery: trio.Nursery, local_embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memoryd")
    embed = {"add_wait": 60.0, "query_timeout": 0.2}
    facts = ("allergic to peanuts", "wife Sarah likes Italian food")
    peer, stalled = await stalled_daemon(short_tmp, nursery, local_embedder, facts, embed=embed)
    # Only the vector could find "wife Sarah likes Italian food": without it, nothing.
    with trio.fail_after(10):
        assert await call_ok(peer, "memory.search", {**ALICE, "query": "which cuisine does his spouse enjoy?"}) == []
    assert stalled.started == 1
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "peanuts"})
    assert [hit["content"] for hit in hits] == ["allergic to peanuts"]
    reasons = [record.fields["reason"] for record in caplog.records if record.getMessage() == "search.keyword_only"]
    assert reasons == ["TooSlowError", "TooSlowError"]


async def test_a_search_waiting_for_a_query_started_at_once_can_be_cancelled(
    short_tmp: Path, nursery: trio.Nursery, local_embedder: Any
) -> None:
    # The reader thread waits for the vector up to query_timeout (60 s here), but the request's
    # own deadline (0.3 s) cancels the search: its thread stops waiting and the reply comes.
    # (No memories: an add embedding on a slow machine could pass 0.3 s itself.)
    config = {"embed": {"query_timeout": 60.0}, "limits": {"request_timeout": 0.3}}
    peer, stalled = await stalled_daemon(short_tmp, nursery, local_embedder, **config)
    with trio.fail_after(10):
        reply = await peer.call("memory.search", {**ALICE, "query": "anything"}, id="slow")
    assert reply["error"]["code"] == -32005 and stalled.started == 1
    assert "result" in await peer.call("system.health", {})


async def test_backend_down_add_still_succeeds_and_is_keyword_searchable(
    short_tmp: Path, nursery: trio.Nursery, openai_backend: FakeBackend
) -> None:
    openai_backend.dim = 8
    # Every request fails with 503 for now.
    for _ in range(1000):
        openai_backend.script.append(Reply(status=503, body=b'{"error": "down"}'))
    daemon = Daemon(openai_config(short_tmp, openai_backend.url))
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    with trio.fail_after(5):
        added = await call_ok(peer, "memory.add", {**ALICE, "content": "allergic to peanuts"})
    assert added["embedded"] is False
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "peanuts"})
    assert [h["id"] for h in hits] == [added["id"]]
    health = await call_ok(peer, "system.health", {})
    assert health["status"] == "degraded" and health["embedder"]["last_error"]
    # The backend comes back: the probe succeeds, the memory is queued and embedded.
    openai_backend.script.clear()
    with trio.fail_after(20):
        while True:
            health = await call_ok(peer, "system.health", {})
            if health["embedder"]["embedded_since_start"] >= 1 and health["backlog"].get("embed", 0) == 0:
                break
            await trio.sleep(0.05)
    assert health["embedder"]["vector_space_ready"] is True and health["status"] == "ok"


async def test_slow_backend_does_not_slow_adds_beyond_add_wait(
    short_tmp: Path, nursery: trio.Nursery, openai_backend: FakeBackend
) -> None:
    daemon = Daemon(openai_config(short_tmp, openai_backend.url, add_wait=0.3))
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await wait_vector_space_ready(peer)
    for _ in range(50):
        openai_backend.script.append(Reply(delay=5.0))
    start = trio.current_time()
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "slow day at the office"})
    assert trio.current_time() - start < 3.0
    assert added["embedded"] is False
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "office"})
    assert [h["id"] for h in hits] == [added["id"]]


@pytest.mark.parametrize(
    "body",
    [
        b"this is not json",
        b'{"data": [{"index": 0, "embedding": [1.0, "x"]}]}',
        b'{"data": [{"index": 0, "embedding": [NaN, 1, 2, 3, 4, 5, 6, 7]}]}',
        b'{"data": [{"index": 0, "embedding": [1, 2]}]}',
        b'{"data": []}',
    ],
)
async def test_garbage_from_the_backend_never_reaches_the_store(
    short_tmp: Path, nursery: trio.Nursery, openai_backend: FakeBackend, body: bytes
) -> None:
    daemon = Daemon(openai_config(short_tmp, openai_backend.url))
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await wait_vector_space_ready(peer)
    for _ in range(100):
        openai_backend.script.append(Reply(body=body))
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "garbage day"})
    assert added["embedded"] is False
    with trio.fail_after(10):
        while not (health := await call_ok(peer, "system.health", {}))["embedder"].get("last_error"):
            await trio.sleep(0.02)
    assert health["backlog"]["embed"] == 1 and health["status"] == "degraded"
    assert [h["id"] for h in await call_ok(peer, "memory.search", {**ALICE, "query": "garbage"})] == [added["id"]]
    # A probe running `memory health` learns it from the exit status, and still gets the report.
    probe = await trio.run_process(
        [sys.executable, "-m", "memory_cli", "health"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "MEMORYD_SOCKET": str(daemon.config.socket_path)},
    )
    assert probe.returncode == 4, probe.stderr
    assert ": degraded (up " in probe.stdout.decode()


async def test_embed_jobs_survive_a_restart(short_tmp: Path, openai_backend: FakeBackend) -> None:
    for _ in range(1000):
        openai_backend.script.append(Reply(status=503, body=b"{}"))
    config = openai_config(short_tmp, openai_backend.url, dim=8)
    async with trio.open_nursery() as nursery:
        first = Daemon(config)
        await nursery.start(first.run)
        peer = await NdjsonPeer.connect(config.socket_path)
        await call_ok(peer, "memory.add", {**ALICE, "content": "queued while the backend was down"})
        assert (await call_ok(peer, "system.health", {}))["backlog"]["embed"] == 1
        first.request_stop()
    openai_backend.script.clear()
    async with trio.open_nursery() as nursery:
        second = Daemon(config)
        await nursery.start(second.run)
        peer = await NdjsonPeer.connect(config.socket_path)
        await drained(peer)
        second.request_stop()


async def test_another_model_is_refused_until_reindex(short_tmp: Path, openai_backend: FakeBackend) -> None:
    first_config = openai_config(short_tmp, openai_backend.url, dim=8)
    async with trio.open_nursery() as nursery:
        first = Daemon(first_config)
        await nursery.start(first.run)
        peer = await NdjsonPeer.connect(first_config.socket_path)
        for fact in ("likes green tea", "runs on sundays", "plays the cello"):
            await call_ok(peer, "memory.add", {**ALICE, "content": fact})
        await drained(peer)
        first.request_stop()

    openai_backend.dim = 16
    other = msgspec.structs.replace(
        first_config, embed=msgspec.structs.replace(first_config.embed, model="other-embed", dim=16)
    )
    with pytest.raises(StartupError, match="memoryd reindex"):
        await Daemon(other).run()
    assert not other.socket_path.exists()

    store = Store(other.db_path)
    store.request_reindex("openai:other-embed", 16)
    store.close()
    async with trio.open_nursery() as nursery:
        second = Daemon(other)
        await nursery.start(second.run)
        peer = await NdjsonPeer.connect(other.socket_path)
        # Search works at once, whatever the backfill has reached.  (The fake backend's vectors
        # are hash noise, so the hits' relevance means nothing here: no threshold.)
        everything = {**ALICE, "min_relevance": 0}
        assert len(await call_ok(peer, "memory.search", {**everything, "query": "tea"})) >= 1
        await drained(peer)
        hits = await call_ok(peer, "memory.search", {**everything, "query": "cello", "limit": 3})
        # The ranker weighs cosines too: only the keyword match is meaningful here, not its rank
        # among noise.
        assert "plays the cello" in [hit["content"] for hit in hits]
        second.request_stop()


async def test_a_call_past_the_request_timeout_is_answered_deadline_exceeded(
    short_tmp: Path, nursery: trio.Nursery, openai_backend: FakeBackend
) -> None:
    config = make_config(
        short_tmp,
        embedder="openai",
        embed={"url": openai_backend.url, "model": "fake-embed", "timeout": 5.0, "retries": 0, "query_timeout": 5.0},
        limits={"request_timeout": 0.3},
    )
    daemon = Daemon(config)
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    await wait_vector_space_ready(peer)
    openai_backend.script.append(Reply(delay=3.0))  # the query embedding hangs
    reply = await peer.call("memory.search", {**ALICE, "query": "anything"}, id="slow")
    assert reply["id"] == "slow" and reply["error"]["code"] == -32005
    assert reply["error"]["data"] == {"timeout_seconds": 0.3}
    # The connection and the daemon carry on.
    assert "result" in await peer.call("system.health", {})
    daemon.request_stop()


async def test_concurrent_adds_on_a_busy_embedder_answer_at_once_and_are_embedded_in_batches(
    short_tmp: Path, nursery: trio.Nursery, openai_backend: FakeBackend
) -> None:
    daemon = Daemon(openai_config(short_tmp, openai_backend.url, add_wait=5.0, timeout=5.0))
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await wait_vector_space_ready(peer)
    calls_before = len(openai_backend.seen)
    # Hold the backend's first reply a moment, so the other adds arrive while it is busy.
    openai_backend.script.append(Reply(delay=0.3))
    embedded: list[bool] = []

    async def add(n: int) -> None:
        client = await NdjsonPeer.connect(daemon.config.socket_path)
        result = await call_ok(client, "memory.add", {**ALICE, "content": f"concurrent fact number {n}"})
        embedded.append(result["embedded"])

    async with trio.open_nursery() as adders:
        for n in range(40):
            adders.start_soon(add, n)
    # One add found the embedder idle and waited for its own vector; the rest were told
    # embedded: false at once, and the backfill batches their vectors.
    assert 1 <= embedded.count(True) < 40
    await drained(peer)
    calls = openai_backend.seen[calls_before:]
    embedded_texts = sum(len(call.body["input"]) for call in calls)
    assert embedded_texts == 40
    assert len(calls) <= 10, f"{len(calls)} backend calls for 40 adds"
    daemon.request_stop()
