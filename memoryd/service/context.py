"""memory.context: one call before each reply, everything the assistant should know for it.

The memories relevant to the message (memory.search, people retriever included), the people
it mentions with their relationships, the summary for the caller's scope, and ``text``: all of
it as one block for a system prompt, at most ``max_chars`` long.  Everything is read through
the same scope as memory.search, so it shows exactly what the caller may see.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memoryd.auth import Authenticator
from memoryd.config import ContextConfig
from memoryd.rpc.dispatch import CallContext
from memoryd.service.memory import MemoryService
from memoryd.service.params import MAX_QUERY_BYTES
from memoryd.service.people import PeopleService
from memoryd.service.people_params import ContextParams
from memoryd.service.provenance import caller_scope
from memoryd.service.summary import SummaryService
from memoryd.service.summary_digest import person_label
from memoryd.service.validation import check_text
from memoryd.store import Scope, SearchHit, StoredPerson, answer_kind, relevance
from memoryd.store.records import EPISODE

SUMMARY_HEADING = "About the user:"
PEOPLE_HEADING = "People mentioned:"
MEMORIES_HEADING = "Relevant memories:"
EPISODES_HEADING = "From past conversations:"
#: memory.context reads at most this many hits (twice its limit) to choose from.
MAX_DEPTH = 100
#: A summary cut shorter than this says too little to be worth its heading.
MIN_SUMMARY_CHARS = 40


@dataclass
class ContextService:
    """memory.context: the memories, people and summary a reply needs, in one call."""

    memory: MemoryService
    people: PeopleService
    summaries: SummaryService
    authenticator: Authenticator
    #: ``[context] min_relevance``: memories below it are not injected (a call may say otherwise).
    config: ContextConfig = ContextConfig()

    async def context(self, params: ContextParams, ctx: CallContext) -> dict[str, Any]:
        scope = caller_scope(params, ctx, self.authenticator)
        check_text("message", params.message, max_bytes=MAX_QUERY_BYTES)
        threshold = self.config.min_relevance if params.min_relevance is None else params.min_relevance
        hits = await self._memories(scope, params.message, params.limit, threshold)
        mentioned = await self.people.mentioned(scope, params.message)
        include_summary = self.config.include_summary if params.include_summary is None else params.include_summary
        summary = (await self.summaries.summary_for(scope))["summary"] if include_summary else ""
        return {
            "memories": hits,
            "people": [person.wire() for person in mentioned],
            "summary": summary,
            "text": render(summary, mentioned, hits, params.max_chars),
        }

    async def _memories(self, scope: Scope, message: str, limit: int, threshold: float) -> list[SearchHit]:
        """The memories to inject, facts first (prefer_facts).  The search reaches twice as far
        as ``limit``, at search's own floor; the facts kept are those relevance.for_context
        chooses (nothing unless the best clears the threshold, then those within a share of the
        best), and episodes only fill the room the facts leave, each clearing the threshold.
        None at all when the message asks for a number or a time and none of them holds one
        (answer_kind.py)."""
        depth = min(MAX_DEPTH, 2 * limit)
        if threshold <= 0:
            return prefer_facts(await self.memory.search_in(scope, message, depth), limit, threshold)
        # The search's own query-level check must not be stricter than the threshold here.
        floor = min(threshold, relevance.SEARCH_FLOOR) if threshold >= relevance.SEARCH_GATE else 0.0
        found = await self.memory.search_in(scope, message, depth, min_relevance=floor)
        chosen = set(relevance.for_context([hit.relevance for hit in found], threshold, depth))
        kept = [hit for i, hit in enumerate(found) if i in chosen or hit.memory_type == EPISODE]
        injected = prefer_facts(kept, limit, threshold)
        # A message asking for a number or a time that none of them holds is not answered by them.
        return injected if answer_kind.can_answer(message, (hit.content for hit in injected)) else []


def prefer_facts(hits: Sequence[SearchHit], limit: int, min_relevance: float) -> list[SearchHit]:
    """The facts first (in search order); episodes fill what room is left, and only those at
    or above the call's relevance threshold (the one its facts cleared): a fact states what
    the conversation said."""
    facts = [hit for hit in hits if hit.memory_type != EPISODE][:limit]
    room = limit - len(facts)
    episodes = [hit for hit in hits if hit.memory_type == EPISODE and hit.relevance >= min_relevance]
    return facts + episodes[: max(room, 0)]


def _person_line(person: StoredPerson) -> str:
    aliases = [a for a in person.aliases if a.casefold() != f"my {person.relationship}"]
    also = f", also {', '.join(aliases)}" if aliases else ""
    return f"- {person_label(person)}{also}"


def _memory_line(hit: SearchHit) -> str:
    content = " ".join(hit.content.split())
    about = f" (about {', '.join(hit.about)})" if hit.about else ""
    return f"- {content}{about}"


def render(summary: str, people: Sequence[StoredPerson], hits: Sequence[SearchHit], max_chars: int) -> str:
    """The block for a system prompt.  Within ``max_chars`` the people and the best memories
    come first (they answer this message); the summary gets what is left, cut at a word."""
    sections: list[list[str]] = []
    used = 0
    for heading, lines in (
        (PEOPLE_HEADING, [_person_line(p) for p in people]),
        (MEMORIES_HEADING, [_memory_line(h) for h in hits if h.memory_type != EPISODE]),
        (EPISODES_HEADING, [_memory_line(h) for h in hits if h.memory_type == EPISODE]),
    ):
        kept: list[str] = []
        for line in lines:
            cost = len(line) + 1 + (0 if kept else len(heading) + 2)
            if used + cost > max_chars:
                break
            kept.append(line)
            used += cost
        if kept:
            sections.append([heading, *kept])
    room = max_chars - used - len(SUMMARY_HEADING) - 3
    summary = " ".join(summary.split()) if "\n" not in summary else summary.strip()
    if summary and room >= MIN_SUMMARY_CHARS:
        if len(summary) > room:
            summary = summary[: room - 1].rsplit(" ", 1)[0] + "…"
        sections.insert(0, [SUMMARY_HEADING, summary])
    return "\n\n".join("\n".join(section) for section in sections)
