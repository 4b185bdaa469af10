"""A statement made ready for the attribute rules: apostrophes straightened, contractions
written out ("I'm" -> "I am"), split into clauses ("I moved to Leeds and my wife works at
Acme" is two), with the opening fillers ("btw", "update:") that say nothing left out.
"""

from __future__ import annotations

import re

from memoryd.knowledge.attribute_rules import NAME
from memoryd.lazy import LazyPattern

FILLER = LazyPattern(
    r"^(?:(?:btw|by\s+the\s+way|fyi|oh|ok|okay|so|well|also|update|correction|actually|"
    r"note|just\s+so\s+you\s+know|fun\s+fact|heads\s+up|these\s+days|nowadays|now|currently|"
    r"apparently|lately|(?:it\s+)?turns\s+out(?:\s+that)?|as\s+of\s+(?:today|now)|today|yesterday|recently|"
    r"last\s+(?:week|month|year)|this\s+(?:week|month|year))\b[\s,:;!-]*)+",
    re.IGNORECASE,
)
#: Each holds an apostrophe: a text without one skips them all.
_CONTRACTIONS = tuple(
    (LazyPattern(pattern, re.IGNORECASE), replacement)
    for pattern, replacement in (
        (r"\bI'm\b", "I am"),
        (r"\b(I|we|they|you)'ve\b", r"\1 have"),
        (r"\b(I|we|they|you|he|she)'ll\b", r"\1 will"),
        (r"\bI'd\b", "I would"),
        (r"\b(he|she|it|that)'s\b", r"\1 is"),
        (r"\b(we|they|you)'re\b", r"\1 are"),
        (r"\bisn't\b", "is not"),
        (r"\baren't\b", "are not"),
        (r"\bdon't\b", "do not"),
        (r"\bdoesn't\b", "does not"),
        (r"\bdidn't\b", "did not"),
    )
)
#: A full stop after a title or an initial ("Dr. Okafor", "Ursula K. Le Guin", "N. Halsted St")
#: ends no clause.
CLAUSES = LazyPattern(
    r"\s*(?:(?<!\bDr)(?<!\bMr)(?<!\bMs)(?<!\bMx)(?<!\bMrs)(?<!\bProf)(?<!\b[A-Z])[;.!?]+\s+|,?\s+(?:and|but|so)\s+(?=(?:i|my|we|our|he|she)\b)|\s+-+\s+)",
    re.IGNORECASE,
)
#: A clause that says its value is the current one ("now lives in", "these days").
NOW = LazyPattern(r"\b(?:now|nowadays|these\s+days)\b", re.IGNORECASE)
#: A clause that is only a person: the first half of "Marco and I ...", "my partner Declan and I ...".
_BARE_SUBJECT = LazyPattern(rf"^\s*(?:{NAME}|(?:my|our)\s+[a-z]+(?:\s+{NAME})?)\s*$", re.IGNORECASE)


def clauses(cleaned: str) -> list[str]:
    """``cleaned`` (straightened, contractions written out) split into its clauses."""
    return _couples_rejoined(CLAUSES.split(cleaned))


def _couples_rejoined(clauses: list[str]) -> list[str]:
    """ "Marco and I got married" was split before "I": the two halves are one clause."""
    if len(clauses) < 2:
        return clauses
    joined = [clauses[0]]
    for clause in clauses[1:]:
        if _BARE_SUBJECT.match(joined[-1]) and clause[:2] in ("I ", "i "):
            joined[-1] += " and " + clause
        else:
            joined.append(clause)
    return joined


def straightened(text: str) -> str:
    """Curly apostrophes made straight and runs of white space made one space."""
    return " ".join(text.replace("’", "'").replace("‘", "'").split())


def expanded(cleaned: str) -> str:
    """``cleaned`` with its contractions written out ("I'm" -> "I am")."""
    if "'" in cleaned:
        for pattern, replacement in _CONTRACTIONS:
            cleaned = pattern.sub(replacement, cleaned)
    return cleaned
