"""When a memory stops being true, read from its own words ("for 2 weeks", "until Friday").

A rule parser, offline: it answers a moment (timezone-aware) or ``None``.  It prefers ``None``
whenever the wording may describe the past or a lasting state: "I worked there for 2 weeks"
and "I have lived here for 3 months" say how long something lasted, not when the memory ends.
A duration counts only when the sentence looks ahead: a "next"/"coming" before it, an
instruction to keep it ("remember", "note") or a present or future verb in its clause, and no
past or perfect verb there, nor a repetition ("every day") or a later time ("in July") that makes
it how long each time or a later event lasts.  Calendar bounds ("until Friday", "until the end of the month")
end at the end of that day in the caller's timezone.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memoryd.knowledge.expiry_calendar import (
    MONTH_NAMES,
    WEEKDAYS,
    calendar_end,
    day_end,
    later_by,
    month_end,
    week_end,
    year_end,
)

#: "temporarily" and its kin name no length: a week, then the memory goes.
TEMPORARY = timedelta(days=7)

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fourteen": 14, "fifteen": 15,
    "twenty": 20, "thirty": 30, "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3,
}  # fmt: skip

_COUNT = r"(?P<count>\d{1,3}(?:\.\d+)?|" + "|".join(sorted(map(re.escape, _NUMBERS), key=len, reverse=True)) + ")"
_UNIT = r"(?P<unit>minute|hour|day|night|week|fortnight|month|year)s?"
#: "for 2 weeks", "for the next 3 days", "over the coming two weeks", "the next 10 days".
_DURATION = re.compile(
    r"\b(?:(?P<prep>for|over|during)\s+)?(?P<ahead>(?:the\s+)?(?:next|coming|following)\s+)?"
    + _COUNT + r"\s+(?:more\s+)?" + _UNIT + r"\b",
    re.IGNORECASE,
)  # fmt: skip
_WHOLE = re.compile(r"\bfor\s+(?:a|one|the)\s+(?P<unit>week|month|day|fortnight)\b(?!\s+(?:of|before|after|ago))", re.I)
_UNTIL = re.compile(r"\b(?:until|till|til|through|thru)\s+(?P<what>[^,.;!?]{2,40})", re.IGNORECASE)
_ONLY = re.compile(
    r"\b(?:(?:this|the)\s+(?P<a>week|weekend|month|year)\s+only|only\s+(?:for\s+)?(?:this|the)\s+(?P<b>week|weekend|month)"
    r"|(?:just\s+)?for\s+(?:this|the)\s+(?P<c>week|weekend|month)\b(?!\s+(?:of|before|after|ago))"
    r"|(?P<d>today|tonight)\s+only|(?:just|only)\s+(?:for\s+)?(?P<e>today|tonight)|\bfor\s+(?P<f>today|tonight)\b)",
    re.IGNORECASE,
)
_TEMPORARY = re.compile(r"\b(?:temporar(?:il)?y|for\s+the\s+time\s+being|for\s+the\s+moment)\b", re.IGNORECASE)
#: An instruction to keep something for a while: then any duration looks ahead.
_KEEP = re.compile(r"^\W*(?:please\s+)?(?:remember|note|keep|store|save|memori[sz]e|hold)\b", re.IGNORECASE)
_PRESENT = re.compile(
    r"\b(?:am|is|are|will|shall|'ll|'m|'re|going\s+to|gonna|need|needs|must|should|can|may|remain|stays?"
    r"|remains|let(?:'s)?|use|using|call|don't|do\s+not)\b|(?<=\w)'s\b|\b(?!(?:some|any|every|no)thing\b|morning\b|evening\b|during\b|spring\b)\w+ing\b",
    re.IGNORECASE,
)
#: "have"/"has" before a past participle (perfect: "I have lived here for 3 months"); alone they
#: say what someone holds now ("I have a rental car until Friday"), which looks ahead.
_PERFECT = (
    r"\b(?:have|has)\s+(?:(?:not|never|just|always|also|only|\w+ly)\s+)?(?:\w+ed|\w+en|had|done|gone|got|kept|"
    r"left|spent|made|held|led|met|paid|said|sat|slept|run|come|become|brought|bought|caught|taught|thought|"
    r"felt|lost|sold|told|found|stood|heard|read|won|worn|begun|sung|swum|drunk|dealt|meant|lent|sent|built)\b"
)
_PAST = re.compile(
    r"\b(?:was|were|had|did|been|ago|used\s+to|'ve|'d|last|previously|once|back\s+in|already)\b|"
    + _PERFECT
    + r"|\b(?:i|we|he|she|they|you)\s+(?:\w+ly\s+)?\w+ed\b"
    r"|\b(?:i|we|he|she|they|you)\s+(?:spent|went|left|took|got|lived|stayed|worked|ran|kept|sat|slept|ate|knew|"
    r"drove|flew|taught|felt|made|lost|held|led|met|paid|said|saw|thought|wore|wrote|studied|tried|came|became)\b",
    re.IGNORECASE,
)
#: A duration in a clause that repeats ("for 2 hours every day", "twice a week") is how long each
#: time lasts, not how long the memory holds.
_HABIT = re.compile(
    r"\b(?:every|each|daily|nightly|weekly|monthly|yearly|per|twice|usually|always|often|sometimes|normally)\b"
    r"|\b(?:a|an)\s+(?:day|night|week|month|year|morning|evening)\b",
    re.IGNORECASE,
)
#: A duration in a clause that places it later ("for 2 weeks in July", "for 10 days next year")
#: starts then, not now: the rules do not guess when it ends.
_LATER = re.compile(
    r"\b(?:" + "|".join(MONTH_NAMES + WEEKDAYS) + r"|spring|summer|autumn|fall|winter|tomorrow"
    r"|next\s+(?:week|weekend|month|year|time))\b",
    re.IGNORECASE,
)
#: Every phrase above holds one of these words or phrases: a text without any is skipped at once.
_GATE_WORDS = frozenset(
    "until till til through thru only temporary temporarily today tonight tomorrow weekend minute minutes hour "
    "hours day days night nights week weeks fortnight fortnights month months year years".split()
)
_GATE_PHRASES = ("time being", "the moment")
_WORDS = re.compile(r"[a-z]+")
_CLAUSE_BREAK = re.compile(r"[.;!?]|\b(?:but|and\s+then|although|whereas|because)\b", re.IGNORECASE)


def zone(name: str | None) -> ZoneInfo | None:
    """The caller's IANA timezone, or None (unknown names are not an error: UTC is used)."""
    if not name or not isinstance(name, str):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def expires_at_ms(text: str, now_ms: int, timezone: str | None = None) -> int | None:
    """``expiry`` for epoch milliseconds, in the caller's timezone (an IANA name) or UTC."""
    tz = zone(timezone) or UTC
    now = datetime.fromtimestamp(now_ms / 1000, tz=tz)
    when = expiry(text, now)
    return None if when is None else int(when.timestamp() * 1000)


def expiry(text: str, now: datetime) -> datetime | None:
    """When a memory worded ``text`` stops being true, or None when the words do not say or the
    rules are unsure.  ``now`` is timezone-aware, in the caller's zone."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    lowered = text.lower()
    if _GATE_WORDS.isdisjoint(_WORDS.findall(lowered)) and not any(phrase in lowered for phrase in _GATE_PHRASES):
        return None  # most memories name no span at all (a set test: a few us; the finders ~50 us)
    text = " ".join(text.replace("\u2019", "'").split())
    for finder in (_until, _only, _duration, _whole, _temporary):
        found = finder(text, now)
        if found is not None:
            return found if found > now else None
    return None


# -- the kinds of phrase --------------------------------------------------------------------------


def _duration(text: str, now: datetime) -> datetime | None:
    for match in _DURATION.finditer(text):
        if not match.group("prep") and not match.group("ahead"):
            continue  # "2 weeks" alone ("2 weeks ago", "a 2 weeks course") says nothing
        if text[match.end() :].lstrip().lower().startswith(("ago", "before", "after", "earlier", "later", "of ")):
            continue
        if not (match.group("ahead") or _looks_ahead(text, match.start(), match.end())):
            continue
        if match.group("ahead") and _past_in_clause(text, match.start(), match.end()):
            continue
        if _elsewhen(text, match.start(), match.end()):
            continue
        return later_by(now, _count(match.group("count")), match.group("unit").lower())
    return None


def _whole(text: str, now: datetime) -> datetime | None:
    match = _WHOLE.search(text)
    if match is None or not _looks_ahead(text, match.start(), match.end()):
        return None
    if _elsewhen(text, match.start(), match.end()):
        return None
    return later_by(now, 1, match.group("unit").lower())


def _until(text: str, now: datetime) -> datetime | None:
    for match in _UNTIL.finditer(text):
        if _past_in_clause(text, match.start(), match.end()):
            continue
        day = calendar_end(match.group("what").strip().lower(), now)
        if day is not None:
            return day
    return None


def _only(text: str, now: datetime) -> datetime | None:
    match = _ONLY.search(text)
    if match is None or _past_in_clause(text, match.start(), match.end()):
        return None
    span = next(group for group in match.groups() if group).lower()
    if span in ("today", "tonight"):
        return day_end(now, now)
    if span in ("week", "weekend"):
        return week_end(now)
    if span == "month":
        return month_end(now)
    return year_end(now)


def _temporary(text: str, now: datetime) -> datetime | None:
    match = _TEMPORARY.search(text)
    if match is None or _past_in_clause(text, match.start(), match.end()):
        return None
    return now + TEMPORARY


# -- reading the clause ---------------------------------------------------------------------------


def _clause(text: str, start: int, end: int) -> str:
    """The clause around a phrase: from the last break before it to the first after it."""
    before = text[:start]
    breaks = list(_CLAUSE_BREAK.finditer(before))
    left = breaks[-1].end() if breaks else 0
    after = _CLAUSE_BREAK.search(text, end)
    right = after.start() if after else len(text)
    return text[left:start] + " " + text[end:right]


def _past_in_clause(text: str, start: int, end: int) -> bool:
    return _PAST.search(_clause(text, start, end)) is not None


def _elsewhen(text: str, start: int, end: int) -> bool:
    """Does the clause of a duration make it a habit's or a later event's, not the memory's?"""
    clause = _clause(text, start, end)
    return _HABIT.search(clause) is not None or _LATER.search(clause) is not None


def _looks_ahead(text: str, start: int, end: int) -> bool:
    """Does the clause of a duration speak of now or later, and of nothing past?"""
    if _past_in_clause(text, start, end):
        return False
    if _KEEP.search(text) is not None:
        return True
    return _PRESENT.search(_clause(text, start, end)) is not None


def _count(word: str) -> float:
    """A duration's count, written in digits ("2", "1.5") or words ("two", "a couple of")."""
    word = " ".join(word.lower().split())
    return float(_NUMBERS[word]) if word in _NUMBERS else float(word)
