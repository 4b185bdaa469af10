"""`memoryd serve --embedder ollama` as a subprocess against a loopback server speaking Ollama's
`POST /api/embed`: configured from MEMORYD_EMBED_* variables, embedding adds and queries, an
add that never waits on a backend that is down or returns garbage, and a model change refused."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fake_backends import FakeBackend, Reply
from tests.wire import sync_call

ALICE = {"user_id": "alice"}


@pytest.fixture
def ollama() -> Iterator[FakeBackend]:
    with FakeBackend("ollama") as backend:
        yield backend


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def ollama_env(url: str, model: str = "nomic-test") -> dict[str, str]:
    return {
        "MEMORYD_EMBED_URL": url,
        "MEMORYD_EMBED_MODEL": model,
        "MEMORYD_EMBED_TIMEOUT": "0.5",
        "MEMORYD_EMBED_RETRIES": "0",
    }


def ok(process: Any, method: str, params: dict[str, Any]) -> Any:
    reply = sync_call(process.socket, method, params)
    assert "result" in reply, reply
    return reply["result"]


def wait_for(process: Any, done: Callable[[dict[str, Any]], bool], timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        health: dict[str, Any] = ok(process, "system.health", {})
        if done(health):
            return health
        assert time.monotonic() < deadline, health
        time.sleep(0.05)


def embedded(health: dict[str, Any]) -> bool:
    return bool(health["embedder"]["vector_space_ready"]) and health["backlog"].get("embed", 0) == 0


def test_adds_and_queries_are_embedded_through_api_embed(daemon_process: Any, ollama: FakeBackend) -> None:
    process = daemon_process("--embedder", "ollama", env=ollama_env(ollama.url)).start()
    added = ok(process, "memory.add", {**ALICE, "content": "my sister lives in Lisbon"})
    wait_for(process, lambda h: embedded(h) and h["embedder"]["embedded_since_start"] >= 1)
    # The fake's vectors come from a hash of the text: the query's vector equals the memory's.
    ollama.seen.clear()
    hits = ok(process, "memory.search", {**ALICE, "query": "my sister lives in Lisbon", "limit": 5})
    assert [hit["id"] for hit in hits] == [added["id"]]
    assert hits[0]["similarity"] == pytest.approx(1.0, abs=1e-3)
    assert [seen.path for seen in ollama.seen] == ["/api/embed"]
    assert ollama.seen[0].body["model"] == "nomic-test"
    assert any("Lisbon" in text for text in ollama.seen[0].body["input"])
    health = ok(process, "system.health", {})
    assert health["embedder"]["backend"] == "ollama" and health["status"] == "ok"
    assert process.stop() == 0


def test_garbage_from_ollama_leaves_the_add_stored_and_queued(daemon_process: Any, ollama: FakeBackend) -> None:
    process = daemon_process("--embedder", "ollama", env=ollama_env(ollama.url)).start()
    wait_for(process, lambda h: bool(h["embedder"]["vector_space_ready"]))
    for _ in range(1000):
        ollama.script.append(Reply(body=b'{"embeddings": [["not", "numbers"]]}'))
    start = time.monotonic()
    added = ok(process, "memory.add", {**ALICE, "content": "the spare key is under the blue pot"})
    assert time.monotonic() - start < 5.0 and added["embedded"] is False
    hits = ok(process, "memory.search", {**ALICE, "query": "spare key"})
    assert [hit["id"] for hit in hits] == [added["id"]]
    health = wait_for(process, lambda h: bool(h["embedder"].get("last_error")))
    assert health["backlog"]["embed"] >= 1 and health["status"] == "degraded"
    # The backend mends: the queued memory is embedded without another call from the client.
    ollama.script.clear()
    wait_for(process, lambda h: embedded(h) and h["status"] == "ok")
    assert process.stop() == 0


def test_an_add_made_while_ollama_is_down_is_embedded_after_a_restart(daemon_process: Any, ollama: FakeBackend) -> None:
    down = daemon_process("--embedder", "ollama", env=ollama_env(closed_port_url())).start()
    start = time.monotonic()
    added = ok(down, "memory.add", {**ALICE, "content": "allergic to penicillin"})
    assert time.monotonic() - start < 5.0 and added["embedded"] is False
    assert [hit["id"] for hit in ok(down, "memory.search", {**ALICE, "query": "penicillin"})] == [added["id"]]
    health = wait_for(down, lambda h: bool(h["embedder"].get("last_error")))
    assert health["backlog"]["embed"] == 1 and health["status"] == "degraded"
    assert down.stop() == 0
    # The job is a table row: the next daemon, with the backend up, embeds the memory.
    up = daemon_process("--embedder", "ollama", env=ollama_env(ollama.url)).start()
    wait_for(up, lambda h: embedded(h) and h["embedder"]["embedded_since_start"] >= 1)
    inputs = [text for seen in ollama.seen for text in seen.body["input"]]
    assert any("penicillin" in text for text in inputs)
    assert up.stop() == 0


def test_another_ollama_model_is_refused_naming_reindex(daemon_process: Any, ollama: FakeBackend) -> None:
    first = daemon_process("--embedder", "ollama", env=ollama_env(ollama.url)).start()
    ok(first, "memory.add", {**ALICE, "content": "likes jazz"})
    wait_for(first, embedded)
    assert first.stop() == 0
    # The dimension is learned from the server's first reply, but the model's name alone decides.
    other_env = ollama_env(ollama.url, model="other-model")
    other = daemon_process("--embedder", "ollama", env=other_env).start(wait=False)
    assert other.proc is not None
    assert other.proc.wait(30) != 0
    assert "memoryd reindex" in other.stderr() and not other.socket.exists()
    # `memoryd reindex` with the new model's settings lets the next start re-embed everything.
    data_dir = str(other.base / "data")
    env = {**other.env, **other_env}
    reindex = subprocess.run(
        [sys.executable, "-m", "memoryd", "reindex", "--data-dir", data_dir, "--embedder", "ollama"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert reindex.returncode == 0, reindex.stderr
    ollama.seen.clear()
    again = daemon_process("--embedder", "ollama", env=other_env).start()
    wait_for(again, lambda h: embedded(h) and h["embedder"]["embedded_since_start"] >= 1)
    assert {seen.body["model"] for seen in ollama.seen} == {"other-model"}
    assert again.stop() == 0
