"""Errors of the embedding and LLM backends the daemon calls over HTTP or runs locally."""

from __future__ import annotations

from typing import ClassVar

from memoryd.errors.base import MemorydError


class EmbedderError(MemorydError):
    """An embedding backend failed: down, too slow, or returned something unusable."""


class LlmError(MemorydError):
    """An LLM backend failed.  The message names the server, never the key or the prompt."""

    #: True when the same request may well succeed later (the job is retried with backoff);
    #: False when it needs a person (the job is parked with the reason).
    retry_later: ClassVar[bool] = False


class LlmUnavailable(LlmError):
    """Connection refused or reset, no reply in time, or 429/5xx on every attempt."""

    retry_later = True

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        #: The server's last Retry-After hint in seconds (capped), for the job's next try.
        self.retry_after = retry_after


class LlmRefused(LlmError):
    """The server refused the request itself (401, 403, 404, a 400 in every output mode)."""


class LlmBadReply(LlmError):
    """Every attempt got a reply that was empty, not JSON, or not the requested shape."""
