"""One extraction: a conversation in, the facts worth storing out (one LLM call, then the filters).

Storing them, near-duplicates against live memories, provenance and the job queue belong to
the caller: this module knows nothing of the store.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memoryd.config import ExtractionConfig
from memoryd.extract.facts import ExtractionResult, Fact
from memoryd.extract.filters import filter_facts
from memoryd.extract.messages import ConversationMessage, Speaker
from memoryd.extract.prompt import build_prompt
from memoryd.log import fields
from memoryd.secrets import SecretKind

if TYPE_CHECKING:
    # Annotations only: the clients import httpx, which a daemon without an LLM never loads.
    from memoryd.llm import LlmClient

log = logging.getLogger("memoryd.extract")


@dataclass(frozen=True)
class ExtractionOutcome:
    facts: list[Fact]
    #: How many facts the model proposed (kept + dropped).
    proposed: int = 0
    #: Dropped facts by reason (see memoryd.extract.filters).
    dropped: dict[str, int] = field(default_factory=dict)
    #: Secrets found in proposed facts by kind, whether dropped or redacted.
    secrets: dict[SecretKind, int] = field(default_factory=dict)
    #: False when the LLM was not called (no user message to read).
    called_llm: bool = True


async def extract_facts(
    llm: LlmClient,
    messages: Sequence[ConversationMessage],
    *,
    speaker: Speaker,
    now: datetime,
    owner_names: Sequence[str] = (),
    timezone_name: str | None = None,
    settings: ExtractionConfig | None = None,
) -> ExtractionOutcome:
    """The facts worth remembering in ``messages`` (the newest ``settings.max_messages``).

    ``now`` must be timezone-aware; ``timezone_name`` (an IANA name such as "Europe/Paris", as
    ash's ``timezone`` field carries) sets the local date the model resolves "tomorrow" against.
    Raises :class:`~memoryd.errors.LlmError` when the model cannot be asked or never answers in
    shape; nothing is half-done then, and the caller may retry the same messages.
    """
    settings = settings or ExtractionConfig()
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    window = list(messages)[-settings.max_messages :]
    if not any(message.role == "user" and message.content.strip() for message in window):
        # Only the assistant spoke: nothing to learn, and no call to pay for.
        return ExtractionOutcome(facts=[], called_llm=False)
    system, chat = build_prompt(window, speaker=speaker, owner_names=owner_names, now=_local(now, timezone_name))
    reply = await llm.complete_json(system, chat, ExtractionResult)
    filtered = filter_facts(
        reply.facts,
        confidence_threshold=settings.confidence_threshold,
        secrets=settings.secrets,
        owner_names=[*owner_names, speaker.username or "", speaker.display_name or ""],
    )
    outcome = ExtractionOutcome(
        facts=filtered.facts,
        proposed=len(reply.facts),
        dropped=dict(filtered.dropped),
        secrets=dict(filtered.secrets),
    )
    # Counts only: the facts themselves are memory contents and stay out of info logs.
    log.info(
        "extracted",
        extra=fields(messages=len(window), proposed=outcome.proposed, kept=len(outcome.facts), dropped=outcome.dropped),
    )
    return outcome


def _local(now: datetime, timezone_name: str | None) -> datetime:
    if timezone_name:
        try:
            return now.astimezone(ZoneInfo(timezone_name))
        except (ZoneInfoNotFoundError, ValueError):
            log.debug("unknown timezone, using UTC", extra=fields(timezone=timezone_name))
    return now.astimezone(UTC)
