"""Ollama's chat API: ``POST {url}/api/chat`` with ``stream: false`` and ``format`` set to the
JSON schema (Ollama 0.5+), else ``"json"``."""

from __future__ import annotations

from typing import Any

import msgspec

from memoryd.llm.client import LlmClient
from memoryd.llm.schema import BadReply


class _Message(msgspec.Struct):
    content: str = ""


class _Reply(msgspec.Struct):
    message: _Message
    done: bool = True
    done_reason: str | None = None


class OllamaChat(
    LlmClient, provider="ollama", path="/api/chat", modes=("json_schema", "json", "plain"), reply_type=_Reply
):
    def request_options(self, mode: str, schema: dict[str, Any], name: str) -> dict[str, Any]:
        options: dict[str, Any] = {"options": {"temperature": self.temperature, "num_predict": self.max_tokens}}
        if mode == "json_schema":
            options["format"] = schema
        elif mode == "json":
            options["format"] = "json"
        return options

    def text_of(self, reply: _Reply) -> str:
        if reply.done_reason == "length":
            raise BadReply("reply cut off at max_tokens")
        return reply.message.content
