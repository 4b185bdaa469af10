"""A real loopback HTTP server standing in for an LLM: OpenAI's /v1/chat/completions and
Ollama's /api/chat on the same port, answering from a per-test script.

    with FakeLlm() as llm:
        llm.script.append(Answer({"facts": [...]}))           # a well-formed reply
        llm.script.append(Raw(429, b"{}", {"Retry-After": "1"}))
        llm.script.append(CutOff())                             # dies mid-reply
        ...
        llm.seen[0].system, llm.seen[0].prompt                  # what it was asked

Script items are used in order, one per request; a callable item gets the request and returns
an item.  With the script empty it answers ``default``, else 500 "script exhausted".
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.loopback_http import LoopbackServer, QuietHandler

OPENAI_PATH = "/v1/chat/completions"
OLLAMA_PATH = "/api/chat"


@dataclass
class Answer:
    """A well-formed chat reply whose assistant text is ``content`` (a dict is sent as JSON)."""

    content: str | dict[str, Any]
    delay: float = 0.0
    finish_reason: str = "stop"


@dataclass
class Raw:
    """Exactly this status, body and headers."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class CutOff:
    """Promises a body, sends part of it, then closes the connection."""


Item = Answer | Raw | CutOff


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def system(self) -> str:
        return "\n".join(m["content"] for m in self.body.get("messages", []) if m.get("role") == "system")

    @property
    def prompt(self) -> str:
        """Every non-system message's text: what the model was given to read."""
        return "\n".join(m["content"] for m in self.body.get("messages", []) if m.get("role") != "system")

    @property
    def prompt_without_clock(self) -> str:
        """The prompt minus its "Current date and time" line: two asks about the same messages
        a minute apart compare equal."""
        return "\n".join(line for line in self.prompt.splitlines() if not line.startswith("Current date and time:"))

    @property
    def mode(self) -> str:
        """The output mode asked for: json_schema, json_object / json, or plain."""
        if "response_format" in self.body:
            return str(self.body["response_format"]["type"])
        fmt = self.body.get("format")
        if isinstance(fmt, dict):
            return "json_schema"
        return "json" if fmt == "json" else "plain"


def envelope(path: str, request: dict[str, Any], answer: Answer) -> bytes:
    text = answer.content if isinstance(answer.content, str) else json.dumps(answer.content)
    if path == OPENAI_PATH:
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": answer.finish_reason}
        return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "choices": [choice]}).encode()
    done_reason = "length" if answer.finish_reason == "length" else "stop"
    reply = {"model": request.get("model"), "message": {"role": "assistant", "content": text}}
    return json.dumps({**reply, "done": True, "done_reason": done_reason}).encode()


class FakeLlm(LoopbackServer):
    def __init__(self) -> None:
        self.script: deque[Item | Callable[[Seen], Item]] = deque()
        self.default: Item | None = None
        #: Output modes answered 400, as a server without structured output does.
        self.reject_modes: set[str] = set()
        self.seen: list[Seen] = []
        fake = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                seen = Seen(self.path, dict(self.headers), json.loads(self.rfile.read(length)))
                fake.seen.append(seen)
                item = fake.next_item(seen)
                if getattr(item, "delay", 0.0):
                    fake.stopping.wait(item.delay)  # type: ignore[union-attr]
                if isinstance(item, CutOff):
                    try:
                        self.send_response(200)
                        self.send_header("Content-Length", "4096")
                        self.end_headers()
                        self.wfile.write(b'{"choices": [{"message": {"content": "{\\"fa')
                        self.wfile.flush()
                    except OSError:
                        pass
                    self.close_connection = True
                    return
                if isinstance(item, Answer):
                    item = Raw(200, envelope(self.path, seen.body, item))
                self.send_json(item.status, item.body, item.headers)

        super().__init__(Handler)

    def next_item(self, seen: Seen) -> Item:
        if seen.path not in (OPENAI_PATH, OLLAMA_PATH):
            return Raw(404, b'{"error": "no such endpoint"}')
        if seen.mode in self.reject_modes:
            return Raw(400, json.dumps({"error": {"message": f"{seen.mode} is not supported"}}).encode())
        item = self.script.popleft() if self.script else self.default
        if callable(item):
            item = item(seen)
        return item if item is not None else Raw(500, b'{"error": "fake llm: script exhausted"}')
