"""Ollama's chat API: ``POST {url}/api/chat`` with ``stream: false`` and ``format`` set to the
JSON schema (Ollama 0.5+), else ``"json"``."""

from __future__ import annotations

from typing import Any

import msgspec

from memoryd.llm.client import ChatMessage, LlmClient
from memoryd.llm.schema import BadReply


class _Message(msgspec.Struct):
    content: str = ""


class _Reply(msgspec.Struct):
    message: _Message
    done: bool = True
    done_reason: str | None = None


class OllamaChat(LlmClient):
    provider = "ollama"
    path = "/api/chat"
    modes = ("json_schema", "json", "plain")

    def payload(
        self, system: str, messages: list[ChatMessage], schema: dict[str, Any], name: str, mode: str
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, *messages],
            "stream": False,
            "options": {"temperature": self.temperature, "num_predict": self.max_tokens},
        }
        if mode == "json_schema":
            body["format"] = schema
        elif mode == "json":
            body["format"] = "json"
        return body

    def reply_text(self, body: bytes) -> str:
        try:
            reply = msgspec.json.decode(body, type=_Reply)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise BadReply(f"not a chat reply: {exc}") from None
        if reply.done_reason == "length":
            raise BadReply("reply cut off at max_tokens")
        return reply.message.content
