"""The predicate rules behind :mod:`memoryd.knowledge.attributes`: what a clause says, once its
subject is known ("works at Acme" -> employer=acme, "is allergic to nuts" -> allergy=nuts).
The possessive shapes ("favorite color is blue") are in :mod:`memoryd.knowledge.possessive_rules`,
the word lists both read in :mod:`memoryd.knowledge.attribute_words` (``DEMONYMS`` and ``JOBS``
are re-exported here for the people parser).

Each rule is a regex over the predicate and a key.  A rule only fires on the statement shapes it
was written for: anything else yields nothing, which later means "no opinion", never a conflict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.knowledge import relationships
from memoryd.knowledge.attribute_words import DEMONYMS as DEMONYMS
from memoryd.knowledge.attribute_words import (
    DIETS,
    JUDGEMENTS,
    NOT_EMPLOYERS,
    NOT_JOB_STATES,
    ORGANISATIONS,
    REFERRING,
    RESTRICTIONS,
    STATUSES,
)
from memoryd.knowledge.attribute_words import JOBS as JOBS
from memoryd.lazy import LazyPattern

BE = r"(?:am|is|are|be|being|been|became|become|becomes|has\s+become|have\s+become)"
#: A name, with its title if it has one ("Dr. Okafor": the title belongs to the name).
NAME = r"(?-i:(?:(?:Dr|Mr|Mrs|Ms|Mx|Prof)\.?\s+)?[A-Z][a-zà-ÿ-]+(?:\s+[A-Z][a-zà-ÿ-]+)?)"
TAIL = r"(?P<value>.+)"


@dataclass(frozen=True)
class Found:
    """One attribute a predicate states; ``negated`` when the predicate itself denies it."""

    key: str
    value: str
    multi_valued: bool = False
    negated: bool = False
    #: Follows from the statement rather than being said ("I'm divorced": no partner now): it
    #: replaces an older value, and an older one need not be replaced for a conflict.
    implied: bool = False
    #: The predicate is a transition ("moved to", "became", "turned"): the value is new.
    changed: bool = False


def looks_like_proper_noun(raw: str, lowercase_text: bool) -> bool:
    """A place or an organisation: capitalised ("Berlin", "the Netherlands"); in an all
    lower-case message anything but a determiner phrase ("a flat", "my parents")."""
    words = raw.split()
    if not words:
        return False
    first = words[0]
    if first.lower() in {"a", "an", "my", "our", "his", "her", "their", "this", "that", "some"}:
        return False
    if first.lower() == "the" and len(words) > 1:
        first = words[1]
    return lowercase_text or first[:1].isupper()


def _employer_ok(raw: str, lowercase_text: bool) -> bool:
    value = raw.lower()
    if value in NOT_EMPLOYERS or value.startswith(("home", "night")):
        return False
    if value.startswith(("a ", "an ")) or value == "myself":
        return True  # "a hospital", "a startup"
    head = re.split(r"\s+(?:on|in|at|of|near|by)\s+", value, maxsplit=1)[0].split()[-1]
    if value.startswith("the ") and head in ORGANISATIONS:
        return True  # "the city council", "the bakery on Mill St", but not "the front desk"
    return looks_like_proper_noun(raw, lowercase_text)  # "the City Council", not "the front desk"


def split_list(value: str) -> list[str]:
    """ "English, French and a little German" -> three values."""
    parts = re.split(r"\s*(?:,|\band\b|&|\bor\b)\s*", value)
    cleaned = [re.sub(r"^(?:a little|some|fluent|fluently|basic|conversational)\s+", "", p) for p in parts]
    return [p for p in (c.strip() for c in cleaned) if p]


def job_value(raw: str) -> str | None:
    """The job in "a senior software engineer at X", or None when the noun is no job."""
    words = re.split(r"\s+(?:at|for|in|with|from|of)\s+", raw, maxsplit=1)[0].split()
    if words and words[0].lower() in {"a", "an", "the"}:
        words = words[1:]
    if not words or words[0].lower() in JUDGEMENTS:
        return None  # "a good cook", "a terrible driver": a description, not a job
    return " ".join(words) if words[-1].lower().rstrip("s") in JOBS else None


def rule(pattern: str) -> LazyPattern:
    """A rule's pattern: case-insensitive, compiled when first used."""
    return LazyPattern(pattern, re.IGNORECASE)


_AGE = rule(
    r"^(?:" + BE + r"|turned|just\s+turned)\s+(?P<value>\d{1,3})"
    r"(?:\s*(?:years?|yrs?)(?:\s+old)?|\s*y/?o)?(?:\s+on\s+(?:\w+day|(?-i:[A-Z])\w+\s+\d{1,2}\w*))?$"
)
_BORN = rule(r"^(?:was|were|is|am)\s+born\s+(?P<prep>on|in|at)\s+" + TAIL)
_RESIDENCE = rule(
    r"^(?:(?:am|is|are|was|were|been)\s+)?"
    r"(?:lives?|lived|living|resides?|residing|(?:" + BE + r"\s+)?based|relocated|"
    r"(?:have|has)?\s*moved(?:\s+back)?|settled)\s+(?:in|to|at|out\s+of)\s+" + TAIL
)
_MOVED_OUT = rule(r"^(?:moved|moving)\s+(?:out\s+of|away\s+from)\s+" + TAIL)
_HOMETOWN = rule(r"^(?:(?:" + BE + r"|comes?|came)\s+(?:originally\s+)?from|grew\s+up\s+in)\s+" + TAIL)
_WORKS = rule(
    r"^(?:(?:(?:"
    + BE
    + r"\s+)?(?:works?|working|worked|employed)(?:\s+(?:remotely|remote|full[- ]time))?|started(?:\s+a\s+new\s+job|\s+working)?|"
    r"(?:got\s+)?hired)\s+(?:at|for|by)|got\s+(?:a\s+)?(?:new\s+)?job\s+(?:at|with))\s+"
    r"(?P<value>.+?)(?:\s+as\s+(?P<job>.+))?$"
)
_WORKS_AS = rule(
    r"^(?:(?:"
    + BE
    + r"\s+)?(?:works?|working|worked|practi[cs]es|practi[cs]ing|serves|serving)|got\s+(?:a\s+)?job)\s+as\s+"
    + TAIL
)
_LEFT_JOB = rule(
    r"^(?:quit|left|lost)\s+(?:my|his|her|their)\s+job(?:\s+at\s+(?P<value>.+))?$"
    r"|^(?:was|were|got)\s+(?:laid\s+off|fired|let\s+go)(?:\s+(?:from|by)\s+(?P<v2>.+))?$"
)
_PROMOTED = rule(r"^(?:got|was|were|has\s+been|have\s+been)\s+promoted\s+to\s+" + TAIL)
_IS_A = rule(r"^" + BE + r"\s+an?\s+" + TAIL)
_STATE = rule(r"^" + BE + r"\s+(?:now\s+)?(?P<value>" + "|".join(NOT_JOB_STATES) + r")$")
_DIET = rule(
    r"^(?:(?:" + BE + r"|went|gone|have\s+gone|has\s+gone|turned|eats?)\s+)?(?:an?\s+|fully\s+|strictly\s+)?"
    r"(?P<value>" + "|".join(DIETS) + r")$"  # a note may be the word alone: "Vegetarian"
)
_DIET_FOLLOWED = rule(r"^(?:follows?|(?:" + BE + r"\s+)?on)\s+an?\s+(?P<value>" + "|".join(DIETS) + r")\s+diet$")
_EATS_MEAT = rule(r"^(?:eats?|started\s+eating)\s+meat(?:\s+again)?$")
_RESTRICTION = rule(r"^" + BE + r"\s+(?P<value>" + "|".join(RESTRICTIONS) + r")$")
_ALLERGY = rule(r"^(?:" + BE + r"\s+allergic\s+to|(?:has|have)\s+an?\s+allergy\s+to)\s+" + TAIL)
_SPEAKS = rule(r"^(?:speaks?|(?:" + BE + r"\s+)?fluent\s+in)\s+(?!to\b|with\b|about\b|up\b)" + TAIL)
_STATUS = rule(
    r"^(?:" + BE + r"|got|just\s+got)\s+(?:an?\s+)?(?P<value>" + "|".join(STATUSES) + r")"
    r"(?:\s+(?:man|woman|person|guy|lady|mom|dad|mother|father))?(?:\s+(?:to|with)\s+(?P<partner>" + NAME + r"))?"
    r"(?:\s+(?:in|on)\s+(?:(?-i:[A-Z])\w+|\d{4})(?:\s+\d{4})?|\s+(?:last|this)\s+(?:week|month|year|spring|summer|fall|autumn|winter))?$"
)
_DATING = rule(r"^" + BE + r"\s+dating\s+(?P<partner>" + NAME + r")$")
_CALLED = rule(r"^(?:" + BE + r"\s+called|goes\s+by|go\s+by|(?:" + BE + r"\s+)?going\s+by)\s+" + TAIL)
_NATIONALITY = rule(r"^" + BE + r"\s+(?:an?\s+)?(?P<value>[a-z-]+)(?:\s+citizen|\s+national)?$")
_OPINION = rule(
    r"^(?:really\s+|absolutely\s+)?(?:(?:started|begun|come|grown|learned)\s+to\s+)?"
    r"(?P<verb>likes?|loves?|enjoys?|adores?|hates?|dislikes?|"
    r"can't\s+stand|cannot\s+stand|detests?)\s+(?P<value>.+)$"
)
_HAS_COUNT = rule(
    r"^(?:has|have)\s+(?P<value>\d+|no|an?|one|two|three|four|five|six|seven|eight)\s+"
    r"(?P<what>kids?|child|children|sons?|daughters?|grandchild|grandchildren|siblings?|"
    r"brothers?|sisters?|dogs?|cats?|pets?)$"
)
#: Predicates that say the value is new: "moved to", "turned 8", "became a judge".
_MOVED = rule(r"^(?:(?:have|has)\s+)?(?:moved|relocated|settled)\b")
_TURNED = rule(r"^(?:(?:just\s+)?turned|became|become|(?:has|have)\s+become)\b")
_STUDIES = rule(
    r"^(?:(?:am\s+|is\s+|are\s+)?stud(?:y|ies|ying)(?P<degree>\s+for\s+an?\s+[\w.]+(?:\s+degree)?)?|"
    + BE
    + r"\s+(?:a\s+)?student)\s+at\s+"
    + TAIL
)
#: "in year 9 at St Anne's": the school; "moved schools, she's at Parkside now": a new one.
_YEAR_AT = rule(r"^(?:is\s+|are\s+|am\s+)?in\s+(?:year|grade|form|class)\s+\d{1,2}\s+(?:at|@)\s+" + TAIL)
_SWITCHED_SCHOOLS = rule(
    r"^(?:moved|changed|switched)\s+schools?(?:\s*,|\s+and)?\s+(?:(?:she|he|they|I)\s+(?:is|are|am)\s+)?(?:now\s+)?"
    r"(?:at|to)\s+(?P<value>(?-i:[A-Z]).+)$"
)
#: "graduated from Warwick": a student there no longer.
_GRADUATED = rule(
    r"^(?:have\s+|has\s+|just\s+)?graduated\s+from\s+(?P<value>.+?)(?:\s+(?:in|on|last|this)\s+\w+(?:\s+\d{4})?)?$"
)
#: A school named as one: "goes to Hollybank Primary", "started secondary school at Westfield
#: Academy" (a new one).
_SCHOOL_NAME = r"(?P<value>(?-i:[A-Z])[\w'.-]*(?:\s+(?-i:[A-Z])[\w'.-]*)*\s+(?:Primary|Secondary|School|Academy|College|High|University|Prep|Grammar)(?:\s+School)?)"
_GOES_TO = rule(r"^(?:goes|go|going|attends?|attending)\s+(?:to\s+)?" + _SCHOOL_NAME + r"$")
_STARTED_AT = rule(
    r"^(?:started|starting|moved\s+to|transferred\s+to)\s+(?:(?:primary|secondary|high|middle|nursery|big)\s+)?"
    r"(?:school\s+)?(?:at\s+)?" + _SCHOOL_NAME + r"(?:\s+(?:in|on|this|last)\s+\w+)?$"
)


#: Statuses that end a relationship: they deny whoever the partner was.
ENDED = frozenset({"single", "divorced", "separated", "widowed"})


def status_facts(value: str, partner: str | None) -> list[Found]:
    """A relationship status and what it says of the partner: named ("engaged to Marco"), or,
    for a status that ends a relationship, denied (whoever it was is no longer the partner)."""
    found = [Found("relationship_status", value)]
    if value in ENDED:
        found.append(Found("partner_name", partner or "", negated=True, implied=True))
    elif partner:
        found.append(Found("partner_name", partner))
    return found


def predicate_facts(rest: str, lowercase_text: bool) -> list[Found]:
    """What the predicate ``rest`` (the clause after its subject, negation removed) states."""
    rest = rest.strip()
    if m := _AGE.match(rest):
        return [Found("age", m["value"], changed=_TURNED.match(rest) is not None)] if int(m["value"]) < 130 else []
    if m := _BORN.match(rest):
        value = m["value"]
        if re.fullmatch(r"\d{4}", value):
            return [Found("birth_year", value)]
        if m["prep"].lower() == "on" or re.match(r"(?i)\d|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec", value):
            return [Found("birthday", value)]
        return [Found("birthplace", value)] if looks_like_proper_noun(value, lowercase_text) else []
    if m := _MOVED_OUT.match(rest):
        return [Found("residence", m["value"], negated=True)]
    if m := _RESIDENCE.match(rest):
        value = re.sub(r"(?i)^(?:the\s+city\s+of\s+)", "", m["value"])
        moved = _MOVED.match(rest) is not None
        return [Found("residence", value, changed=moved)] if looks_like_proper_noun(value, lowercase_text) else []
    if m := _HOMETOWN.match(rest):
        return [Found("hometown", m["value"])] if looks_like_proper_noun(m["value"], lowercase_text) else []
    if m := _WORKS_AS.match(rest):
        job = job_value(m["value"]) or m["value"]
        return [Found("job", job)]
    if m := _WORKS.match(rest):
        found = [Found("employer", m["value"])] if _employer_ok(m["value"], lowercase_text) else []
        if m["job"] and (job := job_value(m["job"])):
            found.append(Found("job", job))
        return found
    if m := _LEFT_JOB.match(rest):
        return [Found("employer", m["value"] or m["v2"] or "", negated=True)]
    if m := _PROMOTED.match(rest):
        return [Found("job", m["value"], changed=True)]
    if m := _STATE.match(rest):
        return [Found("job", m["value"]), Found("employer", "", negated=True)]
    if m := _DIET.match(rest):
        return [Found("diet", m["value"])]
    if m := _DIET_FOLLOWED.match(rest):
        return [Found("diet", m["value"])]
    if _EATS_MEAT.match(rest):
        return [Found("diet", "omnivore")]
    if m := _RESTRICTION.match(rest):
        return [Found("diet_restriction", m["value"].replace(" ", "-"), multi_valued=True)]
    if m := _ALLERGY.match(rest):
        return [Found("allergy", v, multi_valued=True) for v in split_list(m["value"])]
    if m := _SPEAKS.match(rest):
        return [Found("language", v, multi_valued=True) for v in split_list(m["value"])]
    if m := _STATUS.match(rest):
        return status_facts(m["value"].lower(), m["partner"])
    if m := _DATING.match(rest):
        return [Found("relationship_status", "dating"), Found("partner_name", m["partner"])]
    if m := _CALLED.match(rest):
        return [Found("nickname" if "by" in rest.lower().split()[:3] else "name", m["value"])]
    if (m := _IS_A.match(rest)) and (job := job_value(m["value"])):
        return [Found("job", job, changed=_TURNED.match(rest) is not None)]
    if (m := _NATIONALITY.match(rest)) and m["value"].lower() in DEMONYMS:
        return [Found("nationality", m["value"])]
    if m := _HAS_COUNT.match(rest):
        what = m["what"].lower()
        return [Found("count:" + (relationships.canonical(what) or what), m["value"])]
    if (m := _STUDIES.match(rest)) and (not m["degree"] or looks_like_proper_noun(m["value"], lowercase_text)):
        return [Found("school", m["value"])]  # not "studying for a test at the library"
    if m := _YEAR_AT.match(rest):
        return [Found("school", m["value"])]
    if m := _SWITCHED_SCHOOLS.match(rest):
        return [Found("school", m["value"], changed=True)]
    if (m := _GRADUATED.match(rest)) and looks_like_proper_noun(m["value"], lowercase_text):
        return [Found("school", m["value"], negated=True)]
    if m := _GOES_TO.match(rest):
        return [Found("school", m["value"])]
    if m := _STARTED_AT.match(rest):
        return [Found("school", m["value"], changed=True)]
    if (m := _OPINION.match(rest)) and m["value"].split()[0].lower() not in REFERRING:
        verb = m["verb"].lower()
        polarity = "negative" if verb.startswith(("hate", "dislike", "can", "detest")) else "positive"
        return [Found("opinion:" + m["value"], polarity)]
    return []
