"""Builds the configured LLM client; configuration mistakes stop start-up with a ConfigError naming the key."""

from __future__ import annotations

from memoryd.config import LlmConfig
from memoryd.errors import ConfigError
from memoryd.http_backend import api_key_from
from memoryd.llm.client import LlmClient
from memoryd.llm.ollama import OllamaChat
from memoryd.llm.openai import OpenAIChat


def make_llm(settings: LlmConfig) -> LlmClient | None:
    """The client for ``[llm]``, not yet started; None when ``provider = "none"`` (extraction off).

    Does no network I/O: a model server that is down at start-up must not stop the daemon.
    """
    if settings.provider == "none":
        return None
    if not settings.url:
        raise ConfigError(f'llm.url is required for provider = "{settings.provider}"')
    if not settings.model:
        raise ConfigError(f'llm.model is required for provider = "{settings.provider}"')
    backend = OllamaChat if settings.provider == "ollama" else OpenAIChat
    try:
        return backend(
            settings.url,
            settings.model,
            # Sent as a Bearer token; Ollama ignores it, a proxy in front of it may want it.
            api_key=api_key_from("llm", settings.api_key, settings.api_key_file),
            timeout=settings.timeout,
            retries=settings.retries,
            concurrency=settings.concurrency,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
        )
    except ValueError as exc:
        raise ConfigError(f"llm.url: {exc}") from None
