"""What kind of answer a question asks for, and whether a memory can hold one.

A question asking for an amount ("How much is my rent?", "What's my student ID number?") or a
time ("When did I last see the dentist?") is answered only by a memory that holds a number or
a time.  The embedder places such a question close to any memory on its topic ("My student loan
covers rent but not much else."), and relevance, which reads the embedder, cannot tell the two
apart; this check can.  memory.context applies it to the memories it is about to inject: when
the message asks for a number or a time and none of them holds one, it injects none.

Only these two kinds: measured held out on the fact set (bench/fit_relevance.py), every
answerable question asking for one had it in its memory, while a question asking for a name or
a place was as often left without one by its answer ("Who's my favourite group?" -> "fav band
radiohead") as by a memory that does not answer it.  The word lists are general English (months,
weekdays, parts of the day, number words), nothing of any particular store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

Kind = Literal["number", "time"]

_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand "
    "million billion once twice half dozen couple few several single double "
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split()
)
_TIME_WORDS = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec "
    "monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays fridays "
    "saturdays sundays weekend weekends weekday weekdays "
    "morning mornings evening evenings afternoon afternoons night nights tonight today tomorrow yesterday "
    "daily weekly monthly yearly annually week weeks month months year years day days noon midnight "
    "christmas easter summer winter spring autumn fall ago since until till before after last next every "
    "early late soon".split()
)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_DIGIT = re.compile(r"\d")
# The question's first words, lowercased and with its spaces squeezed.
_ASKS_TIME = re.compile(
    r"^(when|what time|what day|what date|which day|which date|what year|which year|how soon|how long ago)\b"
    r"|\bwhat (time|day|date|year|month)\b"
)
_ASKS_NUMBER = re.compile(
    r"^how (many|much|old|long|often|tall|far|big|heavy|high)\b|\b(number|size|amount|price|cost)\b"
)


def asks_for(question: str) -> Kind | None:
    """ "time", "number", or None for a question that asks for neither (or for something else)."""
    text = " ".join(question.casefold().split())
    if _ASKS_TIME.search(text):
        return "time"
    if _ASKS_NUMBER.search(text):
        return "number"
    return None


_TIME_OR_NUMBER_WORDS = _NUMBER_WORDS | _TIME_WORDS


def holds(text: str, kind: Kind) -> bool:
    """Whether ``text`` holds something of ``kind``: a digit or a number word (either kind: a
    time is often written in numbers, "half past five", "the third of March"), or a time word
    (a time)."""
    if _DIGIT.search(text):
        return True
    words = _NUMBER_WORDS if kind == "number" else _TIME_OR_NUMBER_WORDS
    return any(word in words for word in _WORD.findall(text.casefold()))


def can_answer(question: str, texts: Iterable[str]) -> bool:
    """False only when ``question`` asks for a number or a time and none of ``texts`` holds one."""
    kind = asks_for(question)
    return kind is None or any(holds(text, kind) for text in texts)
