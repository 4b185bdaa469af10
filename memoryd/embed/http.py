"""Embedding over HTTP: Ollama (``/api/embed``) and OpenAI-compatible servers (``/v1/embeddings``).

Transient failures (connect errors, timeouts, 429, 5xx) are retried with exponential backoff
and jitter; a 4xx or an unusable reply fails at once.  Every failure reaches the caller as an
:class:`~memoryd.errors.EmbedderError` that names the server but never the API key.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, ClassVar, Unpack

import msgspec
import numpy as np
import trio

from memoryd.embed.vectors import F32, checked_unit_rows, empty, text_batch
from memoryd.errors import EmbedderError
from memoryd.http_backend import HttpBackend, Refused, Retryable, ServerOptions, backoff_delay
from memoryd.log import fields

log = logging.getLogger("memoryd.embed")


class _OllamaReply(msgspec.Struct):
    embeddings: list[list[float]]


class _OpenAIItem(msgspec.Struct):
    index: int
    embedding: list[float]


class _OpenAIReply(msgspec.Struct):
    data: list[_OpenAIItem]


class HttpEmbedder(HttpBackend):
    """Shared machinery; :class:`OllamaEmbedder` and :class:`OpenAIEmbedder` fill in the wire format."""

    backend: ClassVar[str]
    path: ClassVar[str]

    def __init__(
        self,
        url: str,
        model: str,
        *,
        dim: int | None = None,
        batch_size: int = 64,
        **options: Unpack[ServerOptions],
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        super().__init__(url, self.path, label=self.backend, model=model, **options)
        self.model_id: str | None = f"{self.backend}:{model}"
        self.dim: int | None = dim or None
        self._batch_size = batch_size

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model_id, "dim": self.dim, **self.connection_status()}

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
            self._failed(exc)
            raise
        self._succeeded()
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    async def _embed_batch(self, texts: list[str]) -> F32:
        body = await self._post(msgspec.json.encode({"model": self.model, "input": texts}))
        try:
            rows = self._rows(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise EmbedderError(f"{self._http.where}: unusable reply: {exc}") from None
        vectors = checked_unit_rows(rows, expected_rows=len(texts), dim=self.dim, source=self._http.where)
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
            except Retryable as failure:
                if attempt + 1 == attempts:
                    raise EmbedderError(f"{self._http.where}: {failure.reason} (after {attempts} attempts)") from None
                delay = backoff_delay(attempt, base=self._backoff, cap=self._max_backoff, hint=failure.retry_after)
                log.warning(
                    "embedding request failed, retrying",
                    extra=fields(
                        backend=self.backend, reason=failure.reason, attempt=attempt + 1, delay=round(delay, 3)
                    ),
                )
                await trio.sleep(delay)
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _attempt(self, payload: bytes) -> bytes:
        try:
            return await self._http.post(payload)
        except Refused as refused:
            raise EmbedderError(f"{self._http.where}: {refused.reason}") from None


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
            raise EmbedderError(f"{self._http.where}: reply indexes are not 0..{len(items) - 1}")
        return [item.embedding for item in sorted(items, key=lambda item: item.index)]
