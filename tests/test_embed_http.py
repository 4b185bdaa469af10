"""Ollama and OpenAI embedders against real loopback HTTP servers standing in for the backends."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pytest
import trio

from memoryd.config import EmbedConfig
from memoryd.embed import NoEmbedder, OllamaEmbedder, OpenAIEmbedder, make_embedder
from memoryd.errors import ConfigError, EmbedderError
from tests.fake_backends import FakeBackend, Reply, unit, vector_for

DIM = 8


class Fast(TypedDict):
    timeout: float
    backoff: float
    max_backoff: float


FAST = Fast(timeout=2.0, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def ollama() -> Iterator[FakeBackend]:
    with FakeBackend("ollama") as backend:
        yield backend


@pytest.fixture
def openai() -> Iterator[FakeBackend]:
    with FakeBackend("openai") as backend:
        yield backend


@pytest.fixture
def closed_port_url() -> str:
    # Bound then closed: nothing listens there, so connecting is refused at once.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def embed(embedder: OllamaEmbedder | OpenAIEmbedder, texts: list[str]) -> np.ndarray:
    with trio.fail_after(10):
        await embedder.start()
        try:
            return await embedder.embed(texts)
        finally:
            await embedder.aclose()


async def test_ollama_happy_path_returns_unit_vectors_in_order(ollama: FakeBackend) -> None:
    embedder = OllamaEmbedder(ollama.url, "nomic-embed-text", **FAST)
    texts = ["allergic to peanuts", "wife Sarah likes Italian food", "東京"]
    vectors = await embed(embedder, texts)
    assert vectors.dtype == np.float32 and vectors.shape == (3, DIM)
    for vector, text in zip(vectors, texts, strict=True):
        np.testing.assert_allclose(vector, unit(vector_for(text)), atol=1e-6)
    [request] = ollama.seen
    assert request.path == "/api/embed"
    assert request.body == {"model": "nomic-embed-text", "input": texts}
    assert embedder.model_id == "ollama:nomic-embed-text"
    assert embedder.dim == DIM
    assert embedder.describe()["state"] == "closed"


async def test_openai_happy_path_sorts_by_index_and_sends_the_key(openai: FakeBackend) -> None:
    embedder = OpenAIEmbedder(openai.url + "/v1/", "text-embedding-3-small", api_key="sk-secret-123", **FAST)
    texts = ["first", "second", "third"]
    vectors = await embed(embedder, texts)
    for vector, text in zip(vectors, texts, strict=True):
        np.testing.assert_allclose(vector, unit(vector_for(text)), atol=1e-6)
    [request] = openai.seen
    assert request.path == "/v1/embeddings"
    assert request.headers["Authorization"] == "Bearer sk-secret-123"
    assert request.body == {"model": "text-embedding-3-small", "input": texts}
    assert embedder.model_id == "openai:text-embedding-3-small"
    assert "sk-secret-123" not in json.dumps(embedder.describe())


async def test_describe_reports_ok_after_a_successful_call(ollama: FakeBackend) -> None:
    embedder = OllamaEmbedder(ollama.url, "m", **FAST)
    with trio.fail_after(10):
        await embedder.embed(["x"])  # start() is optional for HTTP backends
        info = embedder.describe()
        await embedder.aclose()
    assert info == {
        "backend": "ollama",
        "model": "ollama:m",
        "dim": DIM,
        "state": "ok",
        "last_error": None,
        "url": ollama.url + "/api/embed",
    }


async def test_inputs_are_sent_in_batches_of_batch_size(ollama: FakeBackend) -> None:
    texts = [f"text {i}" for i in range(5)]
    vectors = await embed(OllamaEmbedder(ollama.url, "m", batch_size=2, **FAST), texts)
    assert [len(seen.body["input"]) for seen in ollama.seen] == [2, 2, 1]
    for vector, text in zip(vectors, texts, strict=True):
        np.testing.assert_allclose(vector, unit(vector_for(text)), atol=1e-6)


async def test_empty_input_makes_no_request(ollama: FakeBackend) -> None:
    vectors = await embed(OllamaEmbedder(ollama.url, "m", dim=DIM, **FAST), [])
    assert vectors.shape == (0, DIM)
    assert ollama.seen == []


async def test_down_backend_start_succeeds_and_embed_raises_after_retries(closed_port_url: str) -> None:
    embedder = OllamaEmbedder(closed_port_url, "m", retries=2, **FAST)
    with trio.fail_after(10):
        await embedder.start()  # a backend being down never stops start-up
        with pytest.raises(EmbedderError, match=r"connection failed \(ConnectError: .*\(after 3 attempts\)"):
            await embedder.embed(["hello"])
        info = embedder.describe()
        await embedder.aclose()
    assert info["state"] == "error"
    assert "ConnectError" in info["last_error"]


async def test_slow_backend_times_out(ollama: FakeBackend) -> None:
    ollama.script.extend([Reply(delay=5.0), Reply(delay=5.0)])
    embedder = OllamaEmbedder(ollama.url, "m", retries=1, timeout=0.2, backoff=0.01)
    with pytest.raises(EmbedderError, match=r"no reply within 0\.2 s \(after 2 attempts\)"):
        await embed(embedder, ["hello"])
    assert len(ollama.seen) == 2


async def test_server_error_then_success_is_retried(ollama: FakeBackend) -> None:
    ollama.script.append(Reply(status=500, body=b'{"error": "loading model"}'))
    vectors = await embed(OllamaEmbedder(ollama.url, "m", retries=2, **FAST), ["hello"])
    np.testing.assert_allclose(vectors[0], unit(vector_for("hello")), atol=1e-6)
    assert len(ollama.seen) == 2


async def test_rate_limit_is_retried_after_retry_after(openai: FakeBackend) -> None:
    openai.script.append(Reply(status=429, body=b"{}", headers={"Retry-After": "0"}))
    vectors = await embed(OpenAIEmbedder(openai.url, "m", retries=1, **FAST), ["hello"])
    assert vectors.shape == (1, DIM)
    assert len(openai.seen) == 2


async def test_persistent_server_errors_fail_after_all_retries(ollama: FakeBackend) -> None:
    ollama.script.extend(Reply(status=503, body=b'{"error": "overloaded"}') for _ in range(4))
    with pytest.raises(EmbedderError, match=r"HTTP 503: overloaded \(after 4 attempts\)"):
        await embed(OllamaEmbedder(ollama.url, "m", retries=3, **FAST), ["hello"])
    assert len(ollama.seen) == 4


async def test_client_error_is_not_retried_and_names_the_reason(ollama: FakeBackend) -> None:
    ollama.script.append(Reply(status=404, body=b'{"error": "model \\"m\\" not found, try pulling it first"}'))
    with pytest.raises(
        EmbedderError, match=r"ollama at http://127\.0\.0\.1:\d+/api/embed: HTTP 404: model \"m\" not found"
    ):
        await embed(OllamaEmbedder(ollama.url, "m", retries=3, **FAST), ["hello"])
    assert len(ollama.seen) == 1


async def test_api_key_never_appears_in_errors(openai: FakeBackend) -> None:
    openai.script.append(Reply(status=401, body=b'{"error": {"message": "Incorrect API key provided: sk-secret-123"}}'))
    embedder = OpenAIEmbedder(openai.url, "m", api_key="sk-secret-123", **FAST)
    with pytest.raises(EmbedderError) as caught:
        await embed(embedder, ["hello"])
    assert "HTTP 401" in str(caught.value)
    assert "sk-secret-123" not in str(caught.value)
    assert "sk-secret-123" not in json.dumps(embedder.describe())


def ollama_body(embeddings: Any) -> bytes:
    return json.dumps({"embeddings": embeddings}).encode()


GARBAGE = [
    pytest.param(b"<html>502 Bad Gateway</html>", "unusable reply", id="not-json"),
    pytest.param(b'{"embeddings": [[0.1, 0.2]', "unusable reply", id="truncated-json"),
    pytest.param(b"{}", "unusable reply", id="missing-key"),
    pytest.param(ollama_body("nope"), "unusable reply", id="not-a-list"),
    pytest.param(ollama_body([[0.1, "x", 0.3]]), "unusable reply", id="string-in-vector"),
    pytest.param(ollama_body([[0.1, True, 0.3]]), "unusable reply", id="bool-in-vector"),
    pytest.param(b'{"embeddings": [[0.1, NaN, 0.3]]}', "unusable reply", id="nan-literal"),
    pytest.param(ollama_body([[0.1, 1e39, 0.3]]), "NaN or infinite", id="overflows-float32"),
    pytest.param(ollama_body([[0.0, 0.0, 0.0]]), "all zeros", id="zero-vector"),
    pytest.param(ollama_body([]), "got 0 embeddings for 1 inputs", id="too-few"),
    pytest.param(ollama_body([[0.1, 0.2], [0.3, 0.4]]), "got 2 embeddings for 1 inputs", id="too-many"),
    pytest.param(ollama_body([[]]), "empty embedding vectors", id="empty-vector"),
]


@pytest.mark.parametrize(("body", "reason"), GARBAGE)
async def test_garbage_replies_raise_embedder_error_without_retry(
    ollama: FakeBackend, body: bytes, reason: str
) -> None:
    ollama.script.append(Reply(body=body))
    with pytest.raises(EmbedderError, match=reason):
        await embed(OllamaEmbedder(ollama.url, "m", retries=3, **FAST), ["hello"])
    assert len(ollama.seen) == 1


async def test_vectors_of_different_lengths_in_one_reply_are_refused(ollama: FakeBackend) -> None:
    ollama.script.append(Reply(body=ollama_body([[0.1, 0.2], [0.3, 0.4, 0.5]])))
    with pytest.raises(EmbedderError, match="different dimensions"):
        await embed(OllamaEmbedder(ollama.url, "m", **FAST), ["a", "b"])


async def test_openai_reply_with_bad_indexes_is_refused(openai: FakeBackend) -> None:
    data = [{"index": 0, "embedding": [0.1, 0.2]}, {"index": 0, "embedding": [0.3, 0.4]}]
    openai.script.append(Reply(body=json.dumps({"data": data}).encode()))
    with pytest.raises(EmbedderError, match="indexes"):
        await embed(OpenAIEmbedder(openai.url, "m", **FAST), ["a", "b"])


async def test_configured_dimension_is_enforced(ollama: FakeBackend) -> None:
    with pytest.raises(EmbedderError, match="embedding dimension 8, expected 16"):
        await embed(OllamaEmbedder(ollama.url, "m", dim=16, **FAST), ["hello"])


async def test_learned_dimension_is_enforced_on_later_replies(ollama: FakeBackend) -> None:
    embedder = OllamaEmbedder(ollama.url, "m", **FAST)
    with trio.fail_after(10):
        assert embedder.dim is None
        await embedder.embed(["first"])
        assert embedder.dim == DIM
        ollama.dim = 12  # the server switched models behind our back
        with pytest.raises(EmbedderError, match="embedding dimension 12, expected 8"):
            await embedder.embed(["second"])
        await embedder.aclose()


def test_factory_builds_http_backends_from_config(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\n", encoding="utf-8")
    ollama = make_embedder("ollama", EmbedConfig(url="http://127.0.0.1:11434", model="nomic-embed-text", dim=768))
    assert isinstance(ollama, OllamaEmbedder)
    assert (ollama.model_id, ollama.dim) == ("ollama:nomic-embed-text", 768)
    openai = make_embedder("openai", EmbedConfig(url="http://127.0.0.1:8080", model="m", api_key_file=str(key_file)))
    assert isinstance(openai, OpenAIEmbedder)
    assert openai.dim is None  # dim = 0 in the config means "learn it"
    assert isinstance(make_embedder("none", EmbedConfig()), NoEmbedder)


async def test_factory_reads_the_api_key_file_and_sends_it(openai: FakeBackend, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\n", encoding="utf-8")
    embedder = make_embedder("openai", EmbedConfig(url=openai.url, model="m", api_key_file=str(key_file)))
    assert isinstance(embedder, OpenAIEmbedder)
    await embed(embedder, ["hello"])
    assert openai.seen[0].headers["Authorization"] == "Bearer sk-from-file"


BAD_CONFIGS = [
    pytest.param("ollama", EmbedConfig(model="m"), "embed.url is required", id="no-url"),
    pytest.param("openai", EmbedConfig(url="http://h"), "embed.model is required", id="no-model"),
    pytest.param("ollama", EmbedConfig(url="ftp://h", model="m"), "embed.url", id="bad-scheme"),
    pytest.param("ollama", EmbedConfig(url="localhost:11434", model="m"), "embed.url", id="no-scheme"),
    pytest.param(
        "openai", EmbedConfig(url="http://h", model="m", api_key="k", api_key_file="/x"), "both set", id="two-keys"
    ),
    pytest.param(
        "openai",
        EmbedConfig(url="http://h", model="m", api_key_file="/nonexistent/key"),
        "api_key_file",
        id="no-key-file",
    ),
]


@pytest.mark.parametrize(("kind", "settings", "message"), BAD_CONFIGS)
def test_factory_refuses_bad_settings_naming_the_key(kind: Any, settings: EmbedConfig, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_embedder(kind, settings)


async def test_no_embedder_refuses_to_embed() -> None:
    embedder = NoEmbedder()
    await embedder.start()
    assert embedder.model_id is None
    with pytest.raises(EmbedderError, match="no embedder configured"):
        await embedder.embed(["hello"])
    assert embedder.describe()["state"] == "disabled"
