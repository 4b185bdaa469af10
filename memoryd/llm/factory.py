"""Builds the configured LLM client; configuration mistakes stop start-up with a ConfigError naming the key."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.config import LlmConfig
from memoryd.errors import ConfigError

if TYPE_CHECKING:
    from memoryd.llm.client import LlmClient


def make_llm(settings: LlmConfig) -> LlmClient | None:
    """The client for ``[llm]``, not yet started; None when ``provider = "none"`` (extraction off).

    Does no network I/O: a model server that is down at start-up must not stop the daemon.
    """
    if settings.provider == "none":
        return None
    # Imported once a provider is configured: the clients import httpx (~25 ms at start).
    from memoryd.http_backend import server_api_key
    from memoryd.llm.ollama import OllamaChat
    from memoryd.llm.openai import OpenAIChat

    api_key = server_api_key("llm", f'provider = "{settings.provider}"', settings)
    backend = OllamaChat if settings.provider == "ollama" else OpenAIChat
    try:
        return backend(
            settings.url,
            settings.model,
            api_key=api_key,
            timeout=settings.timeout,
            retries=settings.retries,
            concurrency=settings.concurrency,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
        )
    except ValueError as exc:
        raise ConfigError(f"llm.url: {exc}") from None
