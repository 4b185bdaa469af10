"""Builds the configured embedder; configuration mistakes stop start-up with a ConfigError naming the key."""

from __future__ import annotations

from pathlib import Path

from memoryd.config import EmbedConfig, EmbedderKind
from memoryd.embed.base import Embedder, NoEmbedder
from memoryd.errors import ConfigError


def make_embedder(kind: EmbedderKind, settings: EmbedConfig | None = None) -> Embedder:
    """The backend for ``embedder = kind``, not yet started (call ``await embedder.start()``).

    Does no network I/O and does not load the model; it only checks the settings.  Each
    backend's module is imported here, when chosen (the local model's libraries, httpx).
    """
    settings = settings or EmbedConfig()
    if kind == "none":
        return NoEmbedder()
    if kind == "local":
        from memoryd.embed.local import LocalEmbedder

        if settings.model_path and not Path(settings.model_path).expanduser().is_dir():
            raise ConfigError(f"embed.model_path: {settings.model_path} is not a directory")
        return LocalEmbedder(Path(settings.model_path).expanduser() if settings.model_path else None)
    if kind in ("ollama", "openai"):
        from memoryd.embed.http import OllamaEmbedder, OpenAIEmbedder
        from memoryd.http_backend import server_api_key

        api_key = server_api_key("embed", f'embedder = "{kind}"', settings)
        backend = OllamaEmbedder if kind == "ollama" else OpenAIEmbedder
        try:
            return backend(
                settings.url,
                settings.model,
                api_key=api_key,
                dim=settings.dim or None,
                timeout=settings.timeout,
                retries=settings.retries,
                batch_size=settings.batch_size,
            )
        except ValueError as exc:
            raise ConfigError(f"embed.url: {exc}") from None
    raise ConfigError(f"embedder: unknown kind {kind!r} (expected local, ollama, openai or none)")
