"""CoalescingEmbedder: concurrent callers share backend calls and each gets exactly its rows."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
import pytest
import trio
import trio.testing

from memoryd.embed import CoalescingEmbedder, LocalEmbedder
from memoryd.errors import EmbedderError
from tests.concurrency import gather_outcomes

DIM = 4


def vector_for(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    vector = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


class HashEmbedder:
    """A small deterministic backend that records its calls and can be held at a gate."""

    model_id: str | None = "test:hash"
    dim: int | None = DIM

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.gate: trio.Event | None = None
        self.fail_with: Exception | None = None
        self.started = 0
        self.closed = 0

    async def start(self) -> None:
        self.started += 1

    async def aclose(self) -> None:
        self.closed += 1

    def describe(self) -> dict[str, Any]:
        return {"backend": "hash", "model": self.model_id, "dim": self.dim, "state": "ok", "last_error": None}

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if self.gate is not None:
            await self.gate.wait()
        await trio.lowlevel.checkpoint()
        if self.fail_with is not None:
            raise self.fail_with
        return np.stack([vector_for(text) for text in texts]) if texts else np.empty((0, DIM), np.float32)


@pytest.fixture
async def inner() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
async def coalescing(inner: HashEmbedder) -> AsyncIterator[CoalescingEmbedder]:
    embedder = CoalescingEmbedder(inner, max_batch=8)
    async with trio.open_nursery() as nursery:
        await nursery.start(embedder.run)
        yield embedder
        nursery.cancel_scope.cancel()


async def wait_for_calls(inner: HashEmbedder, count: int) -> None:
    while len(inner.calls) < count:
        await trio.sleep(0)


async def gather(embedder: CoalescingEmbedder, requests: list[list[str]]) -> list[np.ndarray | BaseException]:
    return await gather_outcomes([functools.partial(embedder.embed, texts) for texts in requests], EmbedderError)


def assert_rows_for(result: np.ndarray | BaseException, texts: list[str]) -> None:
    assert isinstance(result, np.ndarray), result
    np.testing.assert_allclose(result, np.stack([vector_for(t) for t in texts]), atol=1e-6)


async def test_calls_issued_in_the_same_moment_become_one_backend_call(
    coalescing: CoalescingEmbedder, inner: HashEmbedder
) -> None:
    requests = [[f"text {i}"] for i in range(5)] + [["pair a", "pair b"]]
    results = await gather(coalescing, requests)
    assert len(inner.calls) == 1
    assert sorted(inner.calls[0]) == sorted(t for r in requests for t in r)
    for result, texts in zip(results, requests, strict=True):
        assert_rows_for(result, texts)


async def test_calls_arriving_during_a_backend_call_share_the_next_one(
    coalescing: CoalescingEmbedder, inner: HashEmbedder
) -> None:
    inner.gate = trio.Event()
    results: dict[str, np.ndarray] = {}

    async def one(text: str) -> None:
        results[text] = await coalescing.embed([text])

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, "first")
            await wait_for_calls(inner, 1)
            for i in range(4):
                nursery.start_soon(one, f"later {i}")
            await trio.testing.wait_all_tasks_blocked()
            inner.gate.set()
    assert [len(call) for call in inner.calls] == [1, 4]
    for text, result in results.items():
        assert_rows_for(result, [text])


async def test_max_batch_caps_a_merged_call_but_a_big_request_goes_alone(
    coalescing: CoalescingEmbedder, inner: HashEmbedder
) -> None:
    requests = [[f"single {i}"] for i in range(6)] + [[f"big {i}" for i in range(10)]]
    results = await gather(coalescing, requests)
    assert all(len(call) <= 8 or len(call) == 10 for call in inner.calls)
    assert [len(call) for call in inner.calls if any(t.startswith("big") for t in call)] == [10]
    assert sum(len(call) for call in inner.calls) == 16
    for result, texts in zip(results, requests, strict=True):
        assert_rows_for(result, texts)


async def test_backend_failure_reaches_every_caller_and_the_next_call_works(
    coalescing: CoalescingEmbedder, inner: HashEmbedder
) -> None:
    inner.fail_with = EmbedderError("ollama at http://x/api/embed: HTTP 500")
    results = await gather(coalescing, [["a"], ["b"], ["c"]])
    assert all(isinstance(r, EmbedderError) and "HTTP 500" in str(r) for r in results)
    inner.fail_with = None
    assert_rows_for(await coalescing.embed(["d"]), ["d"])


async def test_unexpected_backend_exception_becomes_embedder_error(
    coalescing: CoalescingEmbedder, inner: HashEmbedder
) -> None:
    inner.fail_with = ZeroDivisionError("bug")
    [result] = await gather(coalescing, [["a"]])
    assert isinstance(result, EmbedderError)
    assert "ZeroDivisionError" in str(result)
    inner.fail_with = None
    assert_rows_for(await coalescing.embed(["b"]), ["b"])


async def test_a_cancelled_caller_is_dropped_and_others_are_served(
    coalescing: CoalescingEmbedder, inner: HashEmbedder
) -> None:
    inner.gate = trio.Event()
    results: dict[str, np.ndarray] = {}

    cancel = trio.CancelScope()

    async def one(text: str) -> None:
        results[text] = await coalescing.embed([text])

    async def doomed() -> None:
        with cancel:
            await coalescing.embed(["cancelled while queued"])

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, "first")
            await wait_for_calls(inner, 1)
            nursery.start_soon(one, "kept")
            nursery.start_soon(doomed)
            await trio.testing.wait_all_tasks_blocked()
            cancel.cancel()
            await trio.testing.wait_all_tasks_blocked()
            inner.gate.set()
    assert inner.calls == [["first"], ["kept"]]
    assert set(results) == {"first", "kept"}


async def test_stopping_the_runner_fails_waiting_callers_instead_of_hanging(inner: HashEmbedder) -> None:
    inner.gate = trio.Event()  # never opened: the backend call hangs until cancelled
    embedder = CoalescingEmbedder(inner)
    outcomes: list[BaseException] = []

    async def caller(text: str) -> None:
        try:
            await embedder.embed([text])
        except EmbedderError as exc:
            outcomes.append(exc)

    with trio.fail_after(10):
        async with trio.open_nursery() as callers, trio.open_nursery() as runner:
            await runner.start(embedder.run)
            callers.start_soon(caller, "in flight")
            await wait_for_calls(inner, 1)
            callers.start_soon(caller, "queued")
            await trio.testing.wait_all_tasks_blocked()
            runner.cancel_scope.cancel()
    assert [str(e) for e in outcomes] == ["embedder is shutting down"] * 2
    inner.gate = None
    with trio.fail_after(10):
        assert_rows_for(await embedder.embed(["after"]), ["after"])  # not running: direct calls


async def test_without_the_runner_calls_go_straight_to_the_backend(inner: HashEmbedder) -> None:
    embedder = CoalescingEmbedder(inner)
    results = await gather(embedder, [["a"], ["b"]])
    assert sorted(map(tuple, inner.calls)) == [("a",), ("b",)]
    assert_rows_for(results[0], ["a"])


async def test_empty_request_makes_no_backend_call(coalescing: CoalescingEmbedder, inner: HashEmbedder) -> None:
    assert (await coalescing.embed([])).shape == (0, DIM)
    assert inner.calls == []


async def test_identity_lifecycle_and_health_come_from_the_backend(
    coalescing: CoalescingEmbedder, inner: HashEmbedder
) -> None:
    await coalescing.start()
    assert (coalescing.model_id, coalescing.dim) == ("test:hash", DIM)
    await gather(coalescing, [["a"], ["b"]])
    info = coalescing.describe()
    assert info["backend"] == "hash"
    assert info["coalescing"] == {
        "running": True,
        "max_batch": 8,
        "queued": 0,
        "backend_calls": 1,
        "texts": 2,
        "queries_at_once": 0,
    }
    await coalescing.aclose()
    assert (inner.started, inner.closed) == (1, 1)


async def test_merged_local_model_calls_give_the_same_vectors_as_direct_calls() -> None:
    local = LocalEmbedder()
    texts = ["allergic to peanuts", "dog", "Meeting with Bob on Tuesday at 3pm", "東京に住んでいます"]
    with trio.fail_after(30):
        await local.start()
        direct = await local.embed(texts)
        embedder = CoalescingEmbedder(local)
        async with trio.open_nursery() as nursery:
            await nursery.start(embedder.run)
            results = await gather(embedder, [[text] for text in texts])
            nursery.cancel_scope.cancel()
    assert embedder.describe()["coalescing"]["backend_calls"] == 1
    for result, expected in zip(results, direct, strict=True):
        assert isinstance(result, np.ndarray)
        assert float(result[0] @ expected) > 0.99999


async def test_a_query_starts_at_once_only_where_the_inner_embedder_can() -> None:
    assert CoalescingEmbedder(HashEmbedder()).embed_query_now("a") is None  # no such path
    local = LocalEmbedder()
    with trio.fail_after(30):
        await local.start()
    coalescing = CoalescingEmbedder(local)
    under_way = coalescing.embed_query_now("a cup of tea")
    assert under_way is not None
    assert under_way.result(timeout=30).shape == (384,)
    assert coalescing.describe()["coalescing"]["queries_at_once"] == 1
    await coalescing.aclose()
    assert coalescing.embed_query_now("a cup of tea") is None
    assert coalescing.describe()["coalescing"]["queries_at_once"] == 1
