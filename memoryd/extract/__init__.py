"""Extraction: from a conversation to the facts worth remembering (one LLM call, then filters).

outcome = await extract_facts(llm, messages, speaker=Speaker(username="david"), now=now)
for fact in outcome.facts: ...   # content, memory_type, subjects, sensitivity, expires_days, shared
"""

from memoryd.extract.extractor import ExtractionOutcome, extract_facts
from memoryd.extract.facts import (
    EPHEMERAL_TTL_DAYS,
    MEMORY_TYPES,
    SENSITIVITIES,
    ExtractedFact,
    ExtractionResult,
    Fact,
    MemoryType,
    Sensitivity,
)
from memoryd.extract.filters import Filtered, filter_facts, normalized_text
from memoryd.extract.messages import ConversationMessage, Speaker, around, owner_as_author
from memoryd.extract.prompt import SYSTEM_PROMPT, build_prompt

__all__ = [
    "EPHEMERAL_TTL_DAYS",
    "MEMORY_TYPES",
    "SENSITIVITIES",
    "SYSTEM_PROMPT",
    "ConversationMessage",
    "ExtractedFact",
    "ExtractionOutcome",
    "ExtractionResult",
    "Fact",
    "Filtered",
    "MemoryType",
    "Sensitivity",
    "Speaker",
    "around",
    "build_prompt",
    "extract_facts",
    "filter_facts",
    "normalized_text",
    "owner_as_author",
]
