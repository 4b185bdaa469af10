"""The rules every extracted fact passes, whatever the model says: pure functions, no I/O.

In order, for each fact the model proposed (a dropped fact is counted under its reason):

=================  ===========================================================================
empty              no content after trimming: dropped
too_long           content over :data:`MAX_FACT_CHARS` (a model pasting the conversation): dropped
malformed          confidence is NaN or infinite: dropped
low_confidence     confidence, clamped to 0..1, under ``extraction.confidence_threshold``: dropped
about_assistant    content about the assistant ("The assistant ...", "I (the assistant) ..."),
                   or stated by it (speaker "assistant", "bot", ...): dropped
secret             a credential (:mod:`memoryd.secrets`): dropped, or redacted and kept when
                   ``extraction.secrets = "redact"``
duplicate          the same normalized text as a fact kept earlier in this reply: dropped
over_limit         past :data:`MAX_FACTS` kept facts: dropped
=================  ===========================================================================

Values that are merely off are mended rather than dropped, since the fact itself may be good:
an unknown ``memory_type`` becomes "knowledge"; an unknown ``sensitivity`` becomes "sensitive"
(fail closed: it is then shown in private chats only); ``expires_days`` is kept for ephemeral
types only, rounded up and clamped to 1..3650, with the type's default when missing; subjects
are trimmed and deduplicated, and the owner's own names alone mean [].
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from memoryd.extract.facts import (
    EPHEMERAL_TTL_DAYS,
    MEMORY_TYPES,
    SENSITIVITIES,
    ExtractedFact,
    Fact,
    MemoryType,
    Sensitivity,
)
from memoryd.secrets import SecretKind, SecretsMode, scan, screen

MAX_FACT_CHARS = 1000
MAX_FACTS = 20
MAX_SUBJECTS = 10
MAX_EXPIRES_DAYS = 3650

_Label = TypeVar("_Label", bound=str)

_ASSISTANT_NAMES = frozenset({"assistant", "the assistant", "ai", "bot", "agent", "system", "chatbot", "model"})
_ABOUT_ASSISTANT = re.compile(
    r"^\s*(?:(?:the|this|our|your)\s+)?(?:ai\s+)?(?:assistant|chatbot|bot)\b"
    r"|^\s*i\s*\(\s*the\s+(?:ai\s+)?assistant\s*\)",
    re.IGNORECASE,
)


@dataclass
class Filtered:
    """The facts kept, and how many were dropped by reason and how many secrets of each kind
    were found (dropped or redacted), for ``system.health``."""

    facts: list[Fact] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)
    secrets: Counter[SecretKind] = field(default_factory=Counter)


def normalized_text(text: str) -> str:
    """The form in which two texts count as the same fact: Unicode-normalized, case-folded,
    whitespace collapsed, without the final punctuation ("Likes tea." == "likes  tea")."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(text.split()).rstrip(" .!?;:,")


def filter_facts(
    proposed: Sequence[ExtractedFact],
    *,
    confidence_threshold: float,
    secrets: SecretsMode,
    owner_names: Sequence[str] = (),
) -> Filtered:
    result = Filtered()
    seen: set[str] = set()
    owners = {name.strip().lstrip("@").casefold() for name in owner_names if name.strip()}
    for fact in proposed:
        reason, kept = _check(fact, confidence_threshold, secrets, owners, result.secrets)
        if kept is not None:
            key = normalized_text(kept.content)
            if key in seen:
                reason = "duplicate"
            elif len(result.facts) >= MAX_FACTS:
                reason = "over_limit"
            else:
                seen.add(key)
                result.facts.append(kept)
                continue
        result.dropped[reason] += 1
    return result


def _check(
    fact: ExtractedFact,
    threshold: float,
    secrets: SecretsMode,
    owners: set[str],
    found: Counter[SecretKind],
) -> tuple[str, Fact | None]:
    """(reason, None) for a dropped fact, ("", the mended fact) for a kept one."""
    content = " ".join(fact.content.split())
    if not content:
        return "empty", None
    if len(content) > MAX_FACT_CHARS:
        return "too_long", None
    if not math.isfinite(fact.confidence):
        return "malformed", None
    confidence = min(1.0, max(0.0, fact.confidence))
    if confidence < threshold:
        return "low_confidence", None
    speaker = (fact.speaker or "").strip().lstrip("@") or None
    if _ABOUT_ASSISTANT.search(content) or (speaker or "").casefold() in _ASSISTANT_NAMES:
        return "about_assistant", None
    screened, secret_scan = screen(content, secrets)
    found.update(secret_scan.found)
    if screened is None:
        return "secret", None
    memory_type = _memory_type(fact.memory_type)
    return "", Fact(
        content=screened,
        memory_type=memory_type,
        confidence=confidence,
        subjects=_subjects(fact.subjects, owners),
        sensitivity=_sensitivity(fact.sensitivity),
        expires_days=_expires_days(memory_type, fact.expires_days),
        shared=fact.shared,
        speaker=speaker,
        aliases=_aliases(fact.aliases),
        redacted=not secret_scan.clean,
    )


def _one_of(value: str, known: Sequence[_Label], fallback: _Label) -> _Label:
    """``value`` as one of the ``known`` labels (case and spaces aside), else ``fallback``."""
    value = value.strip().lower()
    for label in known:
        if value == label:
            return label  # the Literal itself, so the type checker knows what came back
    return fallback


def _memory_type(value: str) -> MemoryType:
    return _one_of(value, MEMORY_TYPES, "knowledge")


def _sensitivity(value: str) -> Sensitivity:
    return _one_of(value, SENSITIVITIES, "sensitive")


def _expires_days(memory_type: MemoryType, value: float | None) -> int | None:
    default = EPHEMERAL_TTL_DAYS.get(memory_type)
    if default is None:
        return None  # a durable fact does not vanish because the model guessed a lifetime
    if value is None or not math.isfinite(value) or value <= 0:
        return default
    return min(MAX_EXPIRES_DAYS, max(1, math.ceil(value)))


def _subjects(subjects: Sequence[str], owners: set[str]) -> list[str]:
    names: list[str] = []
    for subject in subjects:
        name = " ".join(subject.split()).lstrip("@")
        folded = name.casefold()
        if not scan(name).clean:
            continue  # a name is never stored redacted: one that holds a credential is dropped
        if name and folded not in _ASSISTANT_NAMES and folded not in (n.casefold() for n in names):
            names.append(name)
    # The owner is named only beside someone else (a joint fact); alone, the fact is the owner's.
    if all(name.casefold() in owners for name in names):
        return []
    return names[:MAX_SUBJECTS]


def _aliases(aliases: dict[str, list[str]]) -> dict[str, list[str]]:
    cleaned: dict[str, list[str]] = {}
    for name, others in aliases.items():
        name = " ".join(name.split())
        kept = [alias for alias in (" ".join(a.split()) for a in others)
                if alias and alias != name and scan(alias).clean]  # fmt: skip
        if name and kept and scan(name).clean:
            cleaned[name] = kept[:MAX_SUBJECTS]
    return cleaned
