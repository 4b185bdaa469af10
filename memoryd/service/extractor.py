"""One extraction, whichever path asked for it (``memory.extract*`` or the background worker):
the model reads the messages, the secrets guard counts what it kept out, the learner stores
the facts.  One object, so both paths count and store alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memoryd.config import ExtractionConfig
from memoryd.extract import ConversationMessage, Speaker, extract_facts, owner_as_author
from memoryd.service.learning import FactLearner, Origin
from memoryd.service.provenance import owner_names
from memoryd.service.secret_guard import SecretsGuard
from memoryd.store import ExtractionJob, Learned, Scope
from memoryd.store.conversation_records import LearnedFrom

if TYPE_CHECKING:
    # Annotations only: the clients import httpx, which a daemon without an LLM never loads.
    from memoryd.llm import LlmClient


@dataclass(frozen=True)
class Extractor:
    learner: FactLearner
    guard: SecretsGuard
    settings: ExtractionConfig

    async def extract(
        self,
        llm: LlmClient,
        messages: Sequence[ConversationMessage],
        speaker: Speaker,
        origin: Origin,
        scope: Scope,
        *,
        timezone: str | None,
        completes: ExtractionJob | None = None,
        read: LearnedFrom | None = None,
    ) -> list[Learned]:
        """Extract facts from ``messages`` and store them in ``scope``; with ``completes``, that
        job's mark moves past its messages in the same transaction."""
        # A message posted with the owner's user_id names the owner as it speaks there: the model
        # is told those names are the owner's, and they speak for an unnamed session speaker.
        own = owner_as_author(messages, scope.user_id)
        if own is not None and speaker.name() is None:
            speaker = own
            if origin.speaker.name() is None:
                origin = dataclasses.replace(origin, speaker=own)
        outcome = await extract_facts(
            llm,
            messages,
            speaker=speaker,
            now=datetime.now(UTC),
            owner_names=owner_names(scope, *((own.username, own.display_name) if own else ())),
            timezone_name=timezone,
            settings=self.settings,
        )
        self.guard.count_extracted(
            outcome.secrets,
            refused=outcome.dropped.get("secret", 0),
            redacted=sum(fact.redacted for fact in outcome.facts),
        )
        if timezone and origin.timezone is None:
            origin = dataclasses.replace(origin, timezone=timezone)
        return await self.learner.learn(outcome.facts, scope, origin, completes=completes, read=read)
