"""What every embedding backend offers the rest of memoryd, and the backend for "no vectors"."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, Protocol, runtime_checkable

from memoryd.embed.vectors import F32
from memoryd.errors import EmbedderError


@runtime_checkable
class Embedder(Protocol):
    """An embedding backend.

    ``model_id`` is the stable name the store records with its vectors (``local:all-MiniLM-L6-v2``,
    ``ollama:<model>``, ``openai:<model>``); only :class:`NoEmbedder` has None.  ``dim`` is None
    until known (an HTTP backend without a configured dim learns it from its first reply).
    """

    @property
    def model_id(self) -> str | None: ...

    @property
    def dim(self) -> int | None: ...

    async def start(self) -> None:
        """Loads the model (local); an HTTP backend does no I/O here and never fails for being down."""
        ...

    async def embed(self, texts: Sequence[str]) -> F32:
        """float32 (len(texts), dim), rows L2-normalized; raises EmbedderError when the backend fails."""
        ...

    async def aclose(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        """For system.health: backend, model, dim, state, last_error (never a secret)."""
        ...


@runtime_checkable
class ImmediateEmbedder(Protocol):
    """An embedder that can start one query's embedding at once, from any thread, on a thread
    of its own (the local model: no event-loop round trip, and a search reads its keyword part
    meanwhile).  The HTTP backends are not: their wait is the server's."""

    def embed_query_now(self, text: str) -> Future[F32] | None:
        """The query's unit vector (dim,) under way, or None when the model is busy or not
        loaded (the caller awaits ``embed`` instead).  The future may fail with EmbedderError."""
        ...


class NoEmbedder:
    """``embedder = "none"``: keyword search only; embed() always raises."""

    model_id: str | None = None
    dim: int | None = None

    async def start(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> F32:
        raise EmbedderError('no embedder configured (embedder = "none")')

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"backend": "none", "model": None, "dim": None, "state": "disabled", "last_error": None}
