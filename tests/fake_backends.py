"""Real loopback HTTP servers standing in for Ollama and OpenAI-compatible embedding backends."""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tests.loopback_http import LoopbackServer, QuietHandler

DIM = 8


def vector_for(text: str, dim: int = DIM) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return [float(x) for x in np.random.default_rng(seed).normal(size=dim)]


def unit(values: list[float]) -> np.ndarray:
    array = np.array(values, dtype=np.float64)
    return array / np.linalg.norm(array)


@dataclass
class Reply:
    status: int = 200
    body: bytes | None = None  # None: a correct reply for the request
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeBackend(LoopbackServer):
    """A threaded HTTP server speaking Ollama's or OpenAI's embedding API.

    ``script`` replies are used first, in order; then every request gets a correct reply
    (``dim`` wide; OpenAI items in reverse order, to prove the client sorts by index).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.dim = DIM
        self.script: deque[Reply | Callable[[dict[str, Any]], Reply]] = deque()
        self.seen: list[Seen] = []
        backend = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length))
                backend.seen.append(Seen(self.path, dict(self.headers), request))
                reply = backend.script.popleft() if backend.script else Reply()
                if callable(reply):
                    reply = reply(request)
                if reply.delay:
                    backend.stopping.wait(reply.delay)
                body = reply.body if reply.body is not None else backend.correct_body(request)
                self.send_json(reply.status, body, reply.headers)

        super().__init__(Handler)

    def correct_body(self, request: dict[str, Any]) -> bytes:
        vectors = [vector_for(text, self.dim) for text in request["input"]]
        if self.kind == "ollama":
            return json.dumps({"model": request["model"], "embeddings": vectors}).encode()
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        return json.dumps({"object": "list", "data": data[::-1], "model": request["model"]}).encode()
