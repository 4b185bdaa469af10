"""The time words and fillers a statement may end with ("... now", "since May", "for two
years", "anymore"), which the attribute rules strip before they read a value."""

from __future__ import annotations

import re

from memoryd.lazy import LazyPattern

TRAILING_PATTERN = LazyPattern(
    r"(?:\s*,?\s*(?:now|after\s+all|these\s+days|nowadays|again|anymore|any\s+more|any\s+longer|too|"
    r"as\s+well|currently|at\s+the\s+moment|right\s+now|full[- ]time|for\s+now|"
    r"since\s+\w+(?:\s+\d+)?|for\s+(?:the\s+(?:past|last)\s+)?(?:a\s+few\s+|a\s+couple\s+(?:of\s+)?|\w+\s+)(?:days?|weeks?|months?|years?)|"
    r"yesterday|today|recently|lately|last\s+(?:night|week|month|year)|"
    r"this\s+(?:week|month|year)|(?:a|\w+)\s+(?:days?|weeks?|months?|years?)\s+ago))+$",
    re.IGNORECASE,
)


class EndAnchored:
    """``TRAILING_PATTERN`` behind a quick test that gives the same answers.

    Searched from every position, the full pattern costs ~60 us on a 30-word clause (it is run
    two or three times per clause, on every memory.add).  A match ends the text, so its last
    word is one of ``_LAST_WORDS`` (within the last 12 characters, "currently" plus a newline
    ``$`` may skip) or it is the "since ..." alternative; when neither is there, nothing can
    match, and the full pattern is not run.  Same flags, so the same case rules.
    """

    _LAST_WORDS = LazyPattern(
        r"(?:now|all|days?|again|more|longer|too|well|currently|moment|time|recently|"
        r"lately|night|weeks?|months?|years?|ago)$",
        re.IGNORECASE,
    )
    _SINCE = LazyPattern(r"since", re.IGNORECASE)

    def __init__(self, pattern: LazyPattern) -> None:
        self.pattern = pattern

    def _may_match(self, text: str) -> bool:
        return bool(self._LAST_WORDS.search(text, max(0, len(text) - 12)) or self._SINCE.search(text))

    def search(self, text: str) -> re.Match[str] | None:
        return self.pattern.search(text) if self._may_match(text) else None

    def sub(self, replacement: str, text: str) -> str:
        return self.pattern.sub(replacement, text) if self._may_match(text) else text


TRAILING = EndAnchored(TRAILING_PATTERN)
