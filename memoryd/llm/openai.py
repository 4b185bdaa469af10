"""OpenAI-compatible chat completions: ``POST {url}/v1/chat/completions`` (OpenAI, vLLM,
llama.cpp's server, LM Studio, LiteLLM, ...)."""

from __future__ import annotations

from typing import Any

import msgspec

from memoryd.llm.client import LlmClient
from memoryd.llm.schema import BadReply


class _Message(msgspec.Struct):
    content: str | None = None
    #: Set instead of content when the model declines (OpenAI's structured-output refusal).
    refusal: str | None = None


class _Choice(msgspec.Struct):
    message: _Message
    finish_reason: str | None = None


class _Reply(msgspec.Struct):
    choices: list[_Choice]


class OpenAIChat(
    LlmClient,
    provider="openai",
    path="/v1/chat/completions",
    modes=("json_schema", "json_object", "plain"),
    reply_type=_Reply,
):
    def request_options(self, mode: str, schema: dict[str, Any], name: str) -> dict[str, Any]:
        options: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if mode == "json_schema":
            # strict=False: strict mode wants every property required and no defaults, which
            # our optional fields are not; the decode checks the shape either way.
            options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": False},
            }
        elif mode == "json_object":
            options["response_format"] = {"type": "json_object"}
        return options

    def text_of(self, reply: _Reply) -> str:
        if not reply.choices:
            raise BadReply("a chat completion without choices")
        choice = reply.choices[0]
        if choice.message.refusal:
            raise BadReply("the model refused to answer")
        if choice.finish_reason == "length":
            raise BadReply("reply cut off at max_tokens")
        return choice.message.content or ""
