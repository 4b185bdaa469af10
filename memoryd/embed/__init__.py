"""Embedding backends: the in-process MiniLM (on onnxruntime), Ollama,
OpenAI-compatible servers, or none.

embedder = make_embedder(config.embedder, config.embed)
await embedder.start()
vectors = await embedder.embed(["some text"])  # float32 (n, dim), unit rows

The backends are imported on first use (PEP 562): a daemon with ``embedder = "none"`` loads
neither the model's libraries nor httpx, and one with the local model does not load httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.embed.base import Embedder, ImmediateEmbedder, NoEmbedder
from memoryd.embed.batcher import CoalescingEmbedder
from memoryd.embed.factory import make_embedder
from memoryd.lazy import exports_on_first_use

if TYPE_CHECKING:
    from memoryd.embed.http import HttpEmbedder, OllamaEmbedder, OpenAIEmbedder
    from memoryd.embed.local import BUNDLED_MODEL_ID, BUNDLED_SHA256, LocalEmbedder

_BACKENDS = {
    "memoryd.embed.http": ("HttpEmbedder", "OllamaEmbedder", "OpenAIEmbedder"),
    "memoryd.embed.local": ("BUNDLED_MODEL_ID", "BUNDLED_SHA256", "LocalEmbedder"),
}

__getattr__ = exports_on_first_use(__name__, _BACKENDS)

__all__ = [
    "BUNDLED_MODEL_ID",
    "BUNDLED_SHA256",
    "CoalescingEmbedder",
    "Embedder",
    "HttpEmbedder",
    "ImmediateEmbedder",
    "LocalEmbedder",
    "NoEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "make_embedder",
]
