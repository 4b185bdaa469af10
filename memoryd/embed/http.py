"""Embedding over HTTP: Ollama (``/api/embed``) and OpenAI-compatible servers (``/v1/embeddings``).

Transient failures (connect errors, timeouts, 429, 5xx) are retried with exponential backoff
and jitter; a 4xx or an unusable reply fails at once.  Every failure reaches the caller as an
:class:`~memoryd.errors.EmbedderError` that names the server but never the API key.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any, ClassVar

import httpx
import msgspec
import numpy as np
import trio

from memoryd.embed.vectors import F32, checked_unit_rows, empty, text_batch
from memoryd.errors import EmbedderError
from memoryd.log import fields

log = logging.getLogger("memoryd.embed")

_RETRY_STATUS = frozenset({408, 429}) | frozenset(range(500, 600))
_ERROR_DETAIL_CHARS = 200


class _OllamaReply(msgspec.Struct):
    embeddings: list[list[float]]


class _OpenAIItem(msgspec.Struct):
    index: int
    embedding: list[float]


class _OpenAIReply(msgspec.Struct):
    data: list[_OpenAIItem]


class _Retryable(Exception):
    """One attempt failed in a way worth retrying; ``retry_after`` is the server's hint (s)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class HttpEmbedder:
    """Shared machinery; :class:`OllamaEmbedder` and :class:`OpenAIEmbedder` fill in the wire format."""

    backend: ClassVar[str]
    path: ClassVar[str]

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        dim: int | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        batch_size: int = 64,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
    ) -> None:
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            raise ValueError("url is not a valid URL") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"url must look like http://host:port, got {_without_secrets(url)!r}")
        if not model:
            raise ValueError("model is required")
        if batch_size < 1 or retries < 0 or timeout <= 0:
            raise ValueError("batch_size must be >= 1, retries >= 0, timeout > 0")
        self.model = model
        self.model_id: str | None = f"{self.backend}:{model}"
        self.dim: int | None = dim or None
        self._endpoint = _endpoint(url, self.path)
        self._shown_url = _without_secrets(self._endpoint)
        self._api_key = api_key or None
        self._timeout = timeout
        self._retries = retries
        self._batch_size = batch_size
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._client: httpx.AsyncClient | None = None
        self._state = "idle"
        self._last_error: str | None = None

    async def start(self) -> None:
        # No request here: a backend that is down at start-up must not stop the daemon.
        if self._client is None:
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self._timeout), headers=headers)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        self._state = "closed"

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "model": self.model_id,
            "dim": self.dim,
            "state": self._state,
            "last_error": self._last_error,
            "url": self._shown_url,
        }

    async def embed(self, texts: Sequence[str]) -> F32:
        batch = text_batch(texts)
        if not batch:
            return empty(self.dim)
        await self.start()
        try:
            parts = [
                await self._embed_batch(batch[start : start + self._batch_size])
                for start in range(0, len(batch), self._batch_size)
            ]
        except EmbedderError as exc:
            self._state, self._last_error = "error", str(exc)
            raise
        self._state, self._last_error = "ok", None
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    async def _embed_batch(self, texts: list[str]) -> F32:
        body = await self._post(msgspec.json.encode({"model": self.model, "input": texts}))
        try:
            rows = self._rows(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise EmbedderError(f"{self.backend} at {self._shown_url}: unusable reply: {exc}") from None
        vectors = checked_unit_rows(
            rows, expected_rows=len(texts), dim=self.dim, source=f"{self.backend} at {self._shown_url}"
        )
        if self.dim is None:
            self.dim = int(vectors.shape[1])
            log.info("embedding dimension learned", extra=fields(backend=self.backend, dim=self.dim))
        return vectors

    def _rows(self, body: bytes) -> list[list[float]]:
        """The reply's vectors in input order; msgspec errors mean an unusable reply."""
        raise NotImplementedError

    async def _post(self, payload: bytes) -> bytes:
        attempts = self._retries + 1
        for attempt in range(attempts):
            try:
                return await self._attempt(payload)
            except _Retryable as failure:
                if attempt + 1 == attempts:
                    raise EmbedderError(
                        f"{self.backend} at {self._shown_url}: {failure.reason} (after {attempts} attempts)"
                    ) from None
                delay = min(self._max_backoff, self._backoff * 2**attempt) * random.uniform(0.5, 1.0)
                if failure.retry_after is not None:
                    delay = min(self._max_backoff, max(delay, failure.retry_after))
                log.warning(
                    "embedding request failed, retrying",
                    extra=fields(
                        backend=self.backend, reason=failure.reason, attempt=attempt + 1, delay=round(delay, 3)
                    ),
                )
                await trio.sleep(delay)
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _attempt(self, payload: bytes) -> bytes:
        assert self._client is not None
        # httpx's timeout bounds each phase; this bounds the whole attempt (a server trickling
        # bytes forever would otherwise never time out).
        with trio.move_on_after(self._timeout) as deadline:
            try:
                response = await self._client.post(
                    self._endpoint, content=payload, headers={"Content-Type": "application/json"}
                )
            except httpx.TimeoutException:
                raise _Retryable(f"no reply within {self._timeout:g} s") from None
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                raise _Retryable(f"connection failed ({type(exc).__name__}: {self._redact(str(exc))})") from None
            except httpx.HTTPError as exc:
                raise EmbedderError(f"{self.backend} at {self._shown_url}: {self._redact(str(exc))}") from None
        if deadline.cancelled_caught:
            raise _Retryable(f"no reply within {self._timeout:g} s")
        if response.status_code in _RETRY_STATUS:
            raise _Retryable(self._status_reason(response), _retry_after(response))
        if response.status_code >= 300:
            raise EmbedderError(f"{self.backend} at {self._shown_url}: {self._status_reason(response)}")
        return response.content

    def _status_reason(self, response: httpx.Response) -> str:
        reason = f"HTTP {response.status_code}"
        detail = _error_detail(response.content)
        return f"{reason}: {self._redact(detail)}" if detail else reason

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text


class OllamaEmbedder(HttpEmbedder):
    """``POST {url}/api/embed`` ``{"model", "input": [...]}`` -> ``{"embeddings": [[...], ...]}``."""

    backend = "ollama"
    path = "/api/embed"

    def _rows(self, body: bytes) -> list[list[float]]:
        return msgspec.json.decode(body, type=_OllamaReply).embeddings


class OpenAIEmbedder(HttpEmbedder):
    """``POST {url}/v1/embeddings`` -> ``{"data": [{"index", "embedding"}, ...]}`` (any order)."""

    backend = "openai"
    path = "/v1/embeddings"

    def _rows(self, body: bytes) -> list[list[float]]:
        items = msgspec.json.decode(body, type=_OpenAIReply).data
        if sorted(item.index for item in items) != list(range(len(items))):
            raise EmbedderError(f"openai at {self._shown_url}: reply indexes are not 0..{len(items) - 1}")
        return [item.embedding for item in sorted(items, key=lambda item: item.index)]


def _endpoint(url: str, path: str) -> str:
    base = url.rstrip("/")
    # Accept "http://host/v1" for OpenAI-style servers as well as "http://host".
    if path.startswith("/v1/") and base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + path


def _without_secrets(url: str) -> str:
    """The URL without user:password and query string, fit for logs and health output."""
    parsed = httpx.URL(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path}"


def _error_detail(body: bytes) -> str:
    """A short error message from a JSON error body (Ollama: {"error": str}; OpenAI: {"error": {"message"}})."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    return error[:_ERROR_DETAIL_CHARS] if isinstance(error, str) else ""


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # absent, or an HTTP date: fall back to our own backoff
