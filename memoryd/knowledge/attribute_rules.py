"""The predicate rules behind :mod:`memoryd.knowledge.attributes`: what a clause says, once its
subject is known ("works at Acme" -> employer=acme, "favorite color is blue" -> favorite:color).

Each rule is a regex over the predicate and a key.  A rule only fires on the statement shapes it
was written for: anything else yields nothing, which later means "no opinion", never a conflict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.knowledge import relationships
from memoryd.lazy import LazyPattern

#: Keys whose values coexist: a second allergy or language adds, it does not replace.
MULTI_VALUED = frozenset({"allergy", "language", "diet_restriction", "school_attended"})

JOBS = frozenset(
    """engineer developer programmer designer teacher professor nurse doctor physician surgeon
    dentist lawyer attorney accountant architect scientist researcher analyst consultant manager
    director ceo cto cfo coo founder cofounder co-founder entrepreneur writer author journalist
    editor artist musician photographer chef cook baker barista waiter waitress bartender pilot
    driver mechanic electrician plumber carpenter farmer firefighter policeman policewoman officer
    soldier student intern freelancer contractor therapist psychologist psychiatrist pharmacist
    veterinarian vet librarian cashier salesman saleswoman realtor banker economist translator
    actor actress dancer singer coach trainer recruiter administrator assistant secretary clerk
    technician paramedic tutor lecturer homemaker specialist mathematician physicist chemist
    biologist statistician investor producer marketer strategist owner president vp lead head
    sysadmin admin devops sre tester copywriter illustrator animator nanny caregiver midwife
    optometrist economist geologist astronomer historian linguist principal dean janitor
    receptionist paralegal judge diplomat politician senator mayor monk priest pastor rabbi""".split()
)

DEMONYMS = frozenset(
    """american british english scottish welsh irish canadian australian german french italian
    spanish portuguese dutch belgian swiss austrian swedish norwegian danish finnish icelandic
    polish czech slovak hungarian romanian bulgarian greek turkish russian ukrainian belarusian
    serbian croatian slovenian bosnian albanian lithuanian latvian estonian israeli lebanese
    egyptian moroccan nigerian kenyan ghanaian ethiopian south-african indian pakistani
    bangladeshi nepali chinese japanese korean vietnamese thai filipino indonesian malaysian
    singaporean mexican brazilian argentinian argentine chilean colombian peruvian venezuelan
    cuban iranian iraqi syrian saudi emirati new-zealander kiwi""".split()
)

DIETS = (
    "vegetarian",
    "vegan",
    "pescatarian",
    "keto",
    "paleo",
    "carnivore",
    "flexitarian",
    "omnivore",
    "raw vegan",
    "plant-based",
)
RESTRICTIONS = (
    "lactose intolerant",
    "lactose-intolerant",
    "gluten-free",
    "gluten free",
    "dairy-free",
    "kosher",
    "halal",
    "celiac",
    "coeliac",
    "diabetic",
)
STATUSES = (
    "single",
    "married",
    "engaged",
    "divorced",
    "widowed",
    "separated",
    "in a relationship",
    "seeing someone",
    "dating someone",
)
NOT_JOB_STATES = ("retired", "unemployed", "self-employed", "between jobs", "out of work")

#: Employer "values" that are really times or places of work ("I work at night").
_NOT_EMPLOYERS = frozenset(
    "night nights home weekends the weekend a living the moment it that this least times all "
    "hours remote remotely".split()
)

#: Opinion objects that point elsewhere: "I like it" and "I hate it" may be about two things.
_REFERRING = frozenset(
    "it that this them those these him her you everything nothing something anything when how what".split()
)
#: Favorites of a context ("my favorite part is the ending"), not of a person.
CONTEXTUAL_FAVORITES = frozenset("part thing bit moment one scene line episode memory quote".split())

BE = r"(?:am|is|are|be|being|been|became|become|becomes|has\s+become|have\s+become)"
_NAME = r"(?-i:[A-Z][a-zà-ÿ-]+(?:\s+[A-Z][a-zà-ÿ-]+)?)"
_TAIL = r"(?P<value>.+)"


@dataclass(frozen=True)
class Found:
    """One attribute a predicate states; ``negated`` when the predicate itself denies it."""

    key: str
    value: str
    multi_valued: bool = False
    negated: bool = False


def _looks_like_proper_noun(raw: str, lowercase_text: bool) -> bool:
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


_ORGANISATIONS = frozenset(
    """council hospital university college school bank government army navy police company firm
    agency ministry department library museum clinic church embassy airline startup""".split()
)


def _employer_ok(raw: str, lowercase_text: bool) -> bool:
    value = raw.lower()
    if value in _NOT_EMPLOYERS or value.startswith(("home", "night")):
        return False
    if value.startswith(("a ", "an ")) or value == "myself":
        return True  # "a hospital", "a startup"
    if value.startswith("the ") and value.split()[-1] in _ORGANISATIONS:
        return True  # "the city council", but not "the front desk"
    return _looks_like_proper_noun(raw, lowercase_text)  # "the City Council", not "the front desk"


def _split_list(value: str) -> list[str]:
    """ "English, French and a little German" -> three values."""
    parts = re.split(r"\s*(?:,|\band\b|&|\bor\b)\s*", value)
    cleaned = [re.sub(r"^(?:a little|some|fluent|fluently|basic|conversational)\s+", "", p) for p in parts]
    return [p for p in (c.strip() for c in cleaned) if p]


#: Adjectives that make "I'm a <adjective> <noun>" a judgement instead of a job title.
_JUDGEMENTS = frozenset(
    """good great bad terrible decent amazing awful excellent big huge lousy better worse natural
    born pretty very really home amateur hobby weekend aspiring wannabe former ex fantastic
    horrible wonderful poor fine proud lazy careful nervous designated backseat""".split()
)


def _job_value(raw: str) -> str | None:
    """The job in "a senior software engineer at X", or None when the noun is no job."""
    words = re.split(r"\s+(?:at|for|in|with|from|of)\s+", raw, maxsplit=1)[0].split()
    if words and words[0].lower() in {"a", "an", "the"}:
        words = words[1:]
    if not words or words[0].lower() in _JUDGEMENTS:
        return None  # "a good cook", "a terrible driver": a description, not a job
    return " ".join(words) if words[-1].lower().rstrip("s") in JOBS else None


def _rule(pattern: str) -> LazyPattern:
    return LazyPattern(pattern, re.IGNORECASE)


_AGE = _rule(
    r"^(?:" + BE + r"|turned|just\s+turned)\s+(?P<value>\d{1,3})"
    r"(?:\s*(?:years?|yrs?)(?:\s+old)?|\s*y/?o)?$"
)
_BORN = _rule(r"^(?:was|were|is|am)\s+born\s+(?P<prep>on|in|at)\s+" + _TAIL)
_RESIDENCE = _rule(
    r"^(?:(?:am|is|are|was|were|been)\s+)?"
    r"(?:lives?|lived|living|resides?|residing|(?:" + BE + r"\s+)?based|relocated|"
    r"(?:have|has)?\s*moved(?:\s+back)?|settled)\s+(?:in|to|at)\s+" + _TAIL
)
_MOVED_OUT = _rule(r"^(?:moved|moving)\s+(?:out\s+of|away\s+from)\s+" + _TAIL)
_HOMETOWN = _rule(r"^(?:(?:" + BE + r"|comes?|came)\s+(?:originally\s+)?from|grew\s+up\s+in)\s+" + _TAIL)
_WORKS = _rule(
    r"^(?:(?:(?:" + BE + r"\s+)?(?:works?|working|worked|employed)|started(?:\s+a\s+new\s+job|\s+working)?|"
    r"(?:got\s+)?hired)\s+(?:at|for|by)|got\s+(?:a\s+)?(?:new\s+)?job\s+(?:at|with))\s+"
    r"(?P<value>.+?)(?:\s+as\s+(?P<job>.+))?$"
)
_WORKS_AS = _rule(r"^(?:(?:" + BE + r"\s+)?(?:works?|working|worked)|got\s+(?:a\s+)?job)\s+as\s+" + _TAIL)
_LEFT_JOB = _rule(
    r"^(?:quit|left|lost)\s+(?:my|his|her|their)\s+job(?:\s+at\s+(?P<value>.+))?$"
    r"|^(?:was|were|got)\s+(?:laid\s+off|fired|let\s+go)(?:\s+(?:from|by)\s+(?P<v2>.+))?$"
)
_PROMOTED = _rule(r"^(?:got|was|were|has\s+been|have\s+been)\s+promoted\s+to\s+" + _TAIL)
_IS_A = _rule(r"^" + BE + r"\s+an?\s+" + _TAIL)
_STATE = _rule(r"^" + BE + r"\s+(?:now\s+)?(?P<value>" + "|".join(NOT_JOB_STATES) + r")$")
_DIET = _rule(
    r"^(?:" + BE + r"|went|gone|have\s+gone|has\s+gone|turned|eats?)\s+(?:an?\s+|fully\s+|strictly\s+)?"
    r"(?P<value>" + "|".join(DIETS) + r")$"
)
_DIET_FOLLOWED = _rule(r"^(?:follows?|(?:" + BE + r"\s+)?on)\s+an?\s+(?P<value>" + "|".join(DIETS) + r")\s+diet$")
_EATS_MEAT = _rule(r"^(?:eats?|started\s+eating)\s+meat(?:\s+again)?$")
_RESTRICTION = _rule(r"^" + BE + r"\s+(?P<value>" + "|".join(RESTRICTIONS) + r")$")
_ALLERGY = _rule(r"^(?:" + BE + r"\s+allergic\s+to|(?:has|have)\s+an?\s+allergy\s+to)\s+" + _TAIL)
_SPEAKS = _rule(r"^(?:speaks?|(?:" + BE + r"\s+)?fluent\s+in)\s+(?!to\b|with\b|about\b|up\b)" + _TAIL)
_STATUS = _rule(
    r"^(?:" + BE + r"|got|just\s+got)\s+(?P<value>" + "|".join(STATUSES) + r")"
    r"(?:\s+to\s+(?P<partner>" + _NAME + r"))?$"
)
_DATING = _rule(r"^" + BE + r"\s+dating\s+(?P<partner>" + _NAME + r")$")
_CALLED = _rule(r"^(?:" + BE + r"\s+called|goes\s+by|go\s+by)\s+" + _TAIL)
_NATIONALITY = _rule(r"^" + BE + r"\s+(?:an?\s+)?(?P<value>[a-z-]+)(?:\s+citizen|\s+national)?$")
_OPINION = _rule(
    r"^(?:really\s+|absolutely\s+)?(?:(?:started|begun|come|grown|learned)\s+to\s+)?"
    r"(?P<verb>likes?|loves?|enjoys?|adores?|hates?|dislikes?|"
    r"can't\s+stand|cannot\s+stand|detests?)\s+(?P<value>.+)$"
)
_HAS_COUNT = _rule(
    r"^(?:has|have)\s+(?P<value>\d+|no|an?|one|two|three|four|five|six|seven|eight)\s+"
    r"(?P<what>kids?|child|children|sons?|daughters?|grandchild|grandchildren|siblings?|"
    r"brothers?|sisters?|dogs?|cats?|pets?)$"
)
_STUDIES = _rule(r"^(?:stud(?:y|ies|ying)|" + BE + r"\s+(?:a\s+)?student)\s+at\s+" + _TAIL)


def predicate_facts(rest: str, lowercase_text: bool) -> list[Found]:
    """What the predicate ``rest`` (the clause after its subject, negation removed) states."""
    rest = rest.strip()
    if m := _AGE.match(rest):
        return [Found("age", m["value"])] if int(m["value"]) < 130 else []
    if m := _BORN.match(rest):
        value = m["value"]
        if re.fullmatch(r"\d{4}", value):
            return [Found("birth_year", value)]
        if m["prep"].lower() == "on" or re.match(r"(?i)\d|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec", value):
            return [Found("birthday", value)]
        return [Found("birthplace", value)] if _looks_like_proper_noun(value, lowercase_text) else []
    if m := _MOVED_OUT.match(rest):
        return [Found("residence", m["value"], negated=True)]
    if m := _RESIDENCE.match(rest):
        value = re.sub(r"(?i)^(?:the\s+city\s+of\s+)", "", m["value"])
        return [Found("residence", value)] if _looks_like_proper_noun(value, lowercase_text) else []
    if m := _HOMETOWN.match(rest):
        return [Found("hometown", m["value"])] if _looks_like_proper_noun(m["value"], lowercase_text) else []
    if m := _WORKS_AS.match(rest):
        job = _job_value(m["value"]) or m["value"]
        return [Found("job", job)]
    if m := _WORKS.match(rest):
        found = [Found("employer", m["value"])] if _employer_ok(m["value"], lowercase_text) else []
        if m["job"] and (job := _job_value(m["job"])):
            found.append(Found("job", job))
        return found
    if m := _LEFT_JOB.match(rest):
        return [Found("employer", m["value"] or m["v2"] or "", negated=True)]
    if m := _PROMOTED.match(rest):
        return [Found("job", m["value"])]
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
        return [Found("allergy", v, multi_valued=True) for v in _split_list(m["value"])]
    if m := _SPEAKS.match(rest):
        return [Found("language", v, multi_valued=True) for v in _split_list(m["value"])]
    if m := _STATUS.match(rest):
        found = [Found("relationship_status", m["value"])]
        return found + ([Found("partner_name", m["partner"])] if m["partner"] else [])
    if m := _DATING.match(rest):
        return [Found("relationship_status", "dating"), Found("partner_name", m["partner"])]
    if m := _CALLED.match(rest):
        return [Found("nickname" if "by" in rest.lower().split()[:2] else "name", m["value"])]
    if (m := _IS_A.match(rest)) and (job := _job_value(m["value"])):
        return [Found("job", job)]
    if (m := _NATIONALITY.match(rest)) and m["value"].lower() in DEMONYMS:
        return [Found("nationality", m["value"])]
    if m := _HAS_COUNT.match(rest):
        what = m["what"].lower()
        return [Found("count:" + (relationships.canonical(what) or what), m["value"])]
    if m := _STUDIES.match(rest):
        return [Found("school", m["value"])]
    if (m := _OPINION.match(rest)) and m["value"].split()[0].lower() not in _REFERRING:
        verb = m["verb"].lower()
        polarity = "negative" if verb.startswith(("hate", "dislike", "can", "detest")) else "positive"
        return [Found("opinion:" + m["value"], polarity)]
    return []


_FAVORITE = _rule(
    r"^(?:new\s+|current\s+|all[- ]time\s+|absolute\s+)?favou?rite\s+(?P<thing>[\w -]+?)\s+"
    r"(?P<verb>is|are|=|has\s+always\s+been|has\s+become|became|would\s+be|was|were)\s+" + _TAIL
)
#: Possessive shapes: "<my|Sarah's> <thing> is <value>" -> key.  "{kind}" keys take the
#: optional qualifier ("work email" -> email:work).
_POSSESSED: tuple[tuple[LazyPattern, str], ...] = tuple(
    (_rule(pattern), key)
    for pattern, key in (
        (r"^(?:first\s+|full\s+|real\s+|legal\s+|given\s+)?name\s+is\s+" + _TAIL, "name"),
        (r"^(?:last\s+name|surname|family\s+name)\s+is\s+" + _TAIL, "last_name"),
        (r"^nick\s?name\s+is\s+" + _TAIL, "nickname"),
        (r"^age\s+is\s+(?P<value>\d{1,3})$", "age"),
        (r"^(?:birthday|date\s+of\s+birth|birth\s+date|dob)\s+is\s+(?:on\s+)?" + _TAIL, "birthday"),
        (r"^(?:(?P<kind>work|personal|school|home)\s+)?e-?mail(?:\s+address)?\s+is\s+" + _TAIL, "email"),
        (
            r"^(?:(?P<kind>work|home|personal)\s+)?(?:phone|cell|mobile)(?:\s+phone)?(?:\s+number)?\s+is\s+" + _TAIL,
            "phone",
        ),
        (r"^(?:job|occupation|profession|job\s+title|title|role|position)\s+is\s+(?:an?\s+)?" + _TAIL, "job"),
        (r"^(?:employer|company|workplace)\s+is\s+" + _TAIL, "employer"),
        (r"^hometown\s+is\s+" + _TAIL, "hometown"),
        (r"^(?:home|house|apartment|flat)\s+is\s+(?:now\s+)?in\s+" + _TAIL, "residence"),
        (r"^(?:home\s+|mailing\s+|street\s+)?address\s+is\s+" + _TAIL, "address"),
        (r"^nationality\s+is\s+" + _TAIL, "nationality"),
        (r"^(?:native\s+language|first\s+language|mother\s+tongue)\s+is\s+" + _TAIL, "native_language"),
        (r"^(?:preferred\s+)?pronouns\s+are\s+" + _TAIL, "pronouns"),
        (r"^time\s?zone\s+is\s+" + _TAIL, "timezone"),
        (r"^blood\s+type\s+is\s+" + _TAIL, "blood_type"),
        (r"^(?:zodiac\s+sign|star\s+sign|sign)\s+is\s+" + _TAIL, "zodiac_sign"),
        (r"^(?P<kind>shoe|dress|shirt|ring|pants)\s+size\s+is\s+" + _TAIL, "size"),
        (r"^diet\s+is\s+(?:an?\s+)?" + _TAIL, "diet"),
        (r"^(?:major|field\s+of\s+study)\s+is\s+" + _TAIL, "major"),
        (r"^(?:university|college|school)\s+is\s+" + _TAIL, "school"),
        (r"^(?:salary|income)\s+is\s+" + _TAIL, "salary"),
        (r"^height\s+is\s+" + _TAIL, "height"),
        (r"^weight\s+is\s+" + _TAIL, "weight"),
    )
)
_ALLERGIES = _rule(r"^allerg(?:y|ies)\s+(?:is|are|include|includes)\s+" + _TAIL)
_LATEST = _rule(r"^(?:new|latest|updated)\s+(?=\w+\s)")


def possessive_facts(rest: str) -> list[Found]:
    """What "<owner's> ``rest``" states, e.g. rest = "favorite color is blue"."""
    rest = rest.strip()
    if (m := _FAVORITE.match(rest)) and m["thing"].split()[0].lower() not in CONTEXTUAL_FAVORITES:
        past = m["verb"].lower() in {"was", "were"}
        return [Found("favorite:" + m["thing"], m["value"], negated=past)]
    if m := _ALLERGIES.match(rest):
        return [Found("allergy", v, multi_valued=True) for v in _split_list(m["value"])]
    rest = _LATEST.sub("", rest)  # "my new phone number is ..." sets the phone number
    for pattern, key in _POSSESSED:
        if m := pattern.match(rest):
            kind = m.groupdict().get("kind")
            return [Found(f"{key}:{kind.lower()}" if kind else key, m["value"])]
    return []
