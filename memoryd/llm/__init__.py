"""LLM backends: OpenAI-compatible chat completions or Ollama, asked for JSON of a given shape.

llm = make_llm(config.llm)            # None when [llm] provider = "none"
await llm.start()
reply = await llm.complete_json(system_prompt, [{"role": "user", "content": "..."}], MyStruct)
"""

from memoryd.llm.client import ChatMessage, LlmClient
from memoryd.llm.factory import make_llm
from memoryd.llm.ollama import OllamaChat
from memoryd.llm.openai import OpenAIChat
from memoryd.llm.schema import decode_reply, json_schema

__all__ = ["ChatMessage", "LlmClient", "OllamaChat", "OpenAIChat", "decode_reply", "json_schema", "make_llm"]
