"""LLM backends: OpenAI-compatible chat completions or Ollama, asked for JSON of a given shape.

llm = make_llm(config.llm)            # None when [llm] provider = "none"
await llm.start()
reply = await llm.complete_json(system_prompt, [{"role": "user", "content": "..."}], MyStruct)

The names are imported on first use (PEP 562): the clients import httpx, which a daemon
with ``provider = "none"`` never needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.lazy import exports_on_first_use

if TYPE_CHECKING:
    from memoryd.llm.client import ChatMessage, LlmClient
    from memoryd.llm.factory import make_llm
    from memoryd.llm.ollama import OllamaChat
    from memoryd.llm.openai import OpenAIChat
    from memoryd.llm.schema import decode_reply, json_schema

_EXPORTS = {
    "memoryd.llm.client": ("ChatMessage", "LlmClient"),
    "memoryd.llm.factory": ("make_llm",),
    "memoryd.llm.ollama": ("OllamaChat",),
    "memoryd.llm.openai": ("OpenAIChat",),
    "memoryd.llm.schema": ("decode_reply", "json_schema"),
}

__getattr__ = exports_on_first_use(__name__, _EXPORTS)

__all__ = ["ChatMessage", "LlmClient", "OllamaChat", "OpenAIChat", "decode_reply", "json_schema", "make_llm"]
