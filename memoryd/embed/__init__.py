"""Embedding backends: the in-process MiniLM (onnxruntime, or numpy without it), Ollama,
OpenAI-compatible servers, or none.

embedder = make_embedder(config.embedder, config.embed)
await embedder.start()
vectors = await embedder.embed(["some text"])  # float32 (n, dim), unit rows
"""

from memoryd.embed.base import Embedder, NoEmbedder
from memoryd.embed.batcher import CoalescingEmbedder
from memoryd.embed.factory import make_embedder
from memoryd.embed.http import HttpEmbedder, OllamaEmbedder, OpenAIEmbedder
from memoryd.embed.local import BUNDLED_MODEL_ID, BUNDLED_SHA256, LocalEmbedder

__all__ = [
    "BUNDLED_MODEL_ID",
    "BUNDLED_SHA256",
    "CoalescingEmbedder",
    "Embedder",
    "HttpEmbedder",
    "LocalEmbedder",
    "NoEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "make_embedder",
]
