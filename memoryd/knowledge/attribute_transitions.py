"""Shapes that say how to reach someone or that a state changed: "reach me at <address>",
"started dating someone", "Marco and I got divorced", "started eating fish again", "changed my
major to law", "I take my coffee with oat milk".

They complement :mod:`memoryd.knowledge.attribute_rules`, which reads what a clause states; these
read a value by its type (an e-mail address, a phone number), a transition between the values of
one key (single -> dating, married -> separated, vegetarian -> eating meat), or a frame whose
words the other rules would misread.  As there, a shape they were not written for yields nothing.
"""

from __future__ import annotations

import re

from memoryd.knowledge import relationships
from memoryd.knowledge.attribute_rules import NAME, Found, job_value, looks_like_proper_noun, rule, status_facts
from memoryd.knowledge.attribute_words import NOT_EMPLOYERS
from memoryd.knowledge.possessive_rules import possessive_facts
from memoryd.knowledge.trailing import TRAILING
from memoryd.lazy import LazyPattern

EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
#: Digits with the usual separators; ``is_phone`` checks how many digits.
PHONE = r"\+?\(?\d[\d ().-]{5,}\d"

#: Whom one marries or leaves: "my husband and I", not "my friend and I".
_PARTNER = r"(?:wife|husband|spouse|partner|boyfriend|girlfriend|fianc[eé]e?|ex)"
_CONTACT_VERB = r"(?:reach|contact|email|e-mail|mail|text|call|ring|message|whatsapp|find|write\s+to)"
#: "(you can) reach me at <address>", "drop me a line at <address>", "text me on <number>": any
#: imperative to get in touch, read by what the value is (an address or a number, not "at 5").
_CONTACT = rule(
    r"^(?:(?:you\s+)?(?:can|could)\s+(?:always\s+)?|please\s+|just\s+|feel\s+free\s+to\s+)?"
    r"(?P<verb>[a-z]+(?:\s+up)?)\s+me(?:\s+[a-z]+){0,3}?\s+(?:at|on|via|through)\s+"
    r"(?P<value>\S+(?:\s+\S+){0,4}?)(?:\s+from\s+now\s+on|\s+instead)?$"
)
#: "pls use kofi@mensah.example (, not outlook)": the address to use, by its type.
_USE_ADDRESS = rule(r"^(?:please\s+|pls\s+|plz\s+)?use\s+(?P<value>" + EMAIL + r")(?:\s*,?\s+not\b.*|\s+instead)?$")
_BEST_WAY = rule(
    r"^(?:the\s+)?(?:best|easiest)\s+(?:way|place|number|address)\s+to\s+" + _CONTACT_VERB + r"\s+me\s+is\s+"
    r"(?:at\s+|on\s+|via\s+)?(?P<value>\S+(?:\s+\S+){0,4}?)$"
)
#: "I'm moving everything to <address>, email me there": a change of address, read by its value.
_MOVED_ADDRESS = rule(
    r"^(?:am\s+|have\s+)?(?:moving|moved|switching|switched|changing|changed)\s+(?:\w+\s+){0,3}?to\s+"
    r"(?P<value>" + EMAIL + r")\b(?!\s+for\b)"
)
_STARTED_DATING = rule(
    r"^(?:just\s+)?(?:started|begun|began)\s+(?:dating|seeing)\s+(?:someone|somebody|(?P<partner>" + NAME + r"))$"
)
_BROKE_UP = rule(
    r"^(?:just\s+)?(?:broke|broken|split)\s+up(?:\s+with\s+(?:(?P<partner>"
    + NAME
    + r")|(?:my|our)\s+"
    + _PARTNER
    + r"))?$"
)
_DIET_RETURN = rule(
    r"^(?:(?:started|begun|began)\s+(?:eating|to\s+eat)|(?:gone|went|going|got|am|is|are|been)\s+back\s+to\s+eating)\s+(?P<food>meat|red\s+meat|fish|seafood|chicken|pork|beef|poultry|steak|bacon)"
    r"(?:\s+again)?(?:\s+(?:after|because|since|following)\b.*)?$"  # "... again after my surgery"
)
#: "I have a girlfriend now": a relationship told by the partner one has.
_HAS_PARTNER = rule(r"^(?:have|has|got)\s+an?\s+(?:new\s+)?(?P<rel>girlfriend|boyfriend|partner|wife|husband)$")
_TIED_THE_KNOT = rule(
    r"^tied\s+the\s+knot(?:\s+with\s+(?P<partner>" + NAME + r"))?(?:\s+(?:in|on|last|this)\s+\w+(?:\s+\d+)?)?$"
)
#: "I quit Airbnb", "left Maersk and has been at Vestas since", "left the bakery, I'm at ...":
#: no longer there (what follows may name the next one, which no rule here reads).
_QUIT_EMPLOYER = rule(
    r"^(?:have\s+|has\s+)?(?:quit|left)\s+(?P<value>"
    + NAME
    + r"|the\s+[a-z]+)(?:(?:\s*,|\s+and)\s+(?:has|have|is|am|are|I|now|joined|"
    r"started|went|moved)\b.*)?$"
)
_MOVED_INTO = rule(
    r"^moved\s+into\s+(?:a|an|the|our|my|his|her|their)\s+(?:new\s+)?(?:\w+\s+)?"
    r"(?:place|flat|house|apartment|home|condo|studio)\s+in\s+(?P<value>.+)$"
)
_EATS_FISH = rule(r"^eats?\s+(?:fish|seafood)$")
#: "has asked to be called Rebecca": what to call them, as "goes by".
_TO_BE_CALLED = rule(
    r"^(?:has\s+|have\s+)?(?:asked|wants?|wanted|prefers?|would\s+like|likes?)\s+to\s+be\s+called\s+(?P<value>"
    + NAME
    + r")(?:\s*,?\s+not\b.*|\s+from\s+now\s+on|\s+instead)?$"
)
_TIMEZONE = rule(r"^(?:am|is|are)\s+on\s+(?P<value>[A-Za-z]+(?:\s+[A-Za-z]+)?)\s+time$")
_HOME_IS = rule(r"^(?:(?:my|our)\s+)?home(?:\s+for\s+(?:me|us))?\s+is\s+(?:now\s+)?(?:in\s+)?(?P<value>.+)$")

#: "Marco and I got married", "my husband and I are separated": a status of the speaker, with
#: the other as the partner.
COUPLE = LazyPattern(
    r"^(?:(?P<partner>" + NAME + r")|(?:my|our)\s+" + _PARTNER + r"(?:\s+(?P<partner3>" + NAME + r"))?)"
    r"\s+and\s+(?:I|me)\s+(?P<rest>.+)$"
    r"|^(?:I|me)\s+and\s+(?:(?P<partner2>" + NAME + r")|(?:my|our)\s+" + _PARTNER + r")\s+(?P<rest2>.+)$",
    re.IGNORECASE,
)
#: What a couple's predicate says: "got married", "are separated", "split up", "divorced".
_COUPLE_STATUS = rule(
    r"^(?:(?:are|were|have|had|just|got|officially|finally|now)\s+)*"
    r"(?P<value>married|engaged|divorced|separated|split(?:\s+up)?|broke\s+up|tied\s+the\s+knot|hitched|wed|"
    r"together|been\s+together|an?\s+item|a\s+couple)"
    # when and where it happened: "in May", "last Friday", "at the registry office", "for six years"
    r"(?:\s+(?:in|on|at|last|this|after|for)\b(?:\s+[\w'-]+){1,5})*$"
)


#: How one has a thing: "I take my coffee with oat milk", "I like my steak rare" (one way at a time).
_HOW = rule(
    r"^(?:likes?|takes?|drinks?|has|have|prefers?|eats?|wants?)\s+(?:my|his|her|their|our)\s+(?P<thing>[a-z]+)\s+"
    r"(?P<value>(?:with|without)\s+[a-z -]+|(?!\w+(?:ly|ed|ing)$|(?:back|here|there|again|today|tonight|ready|home)$)[a-z-]+)$"
)
#: "prefers the aisle seat", "prefer dark chocolate": a preference among kinds of one thing.
_PREFERS = rule(r"^prefers?\s+(?:the\s+|an?\s+)?(?P<value>[a-z-]+)\s+(?P<thing>[a-z]+)$")
#: Feelings that are opinions: "scared of dogs" after "loves dogs".
_FEELS = rule(
    r"^(?:am|is|are)\s+(?P<feeling>scared|afraid|terrified|sick|tired|fond)\s+of\s+"
    r"(?P<value>[a-z][a-z -]*)$"
)
#: "study law at UCL": the field and the school.
_STUDIES_AT = rule(
    r"^(?:stud(?:y|ies|ying)|majors?\s+in|majoring\s+in)\s+(?!at\b|in\b|for\b|hard\b|abroad\b)(?P<field>[a-z]+(?:\s+[a-z]+)?)"
    r"\s+at\s+(?P<school>.+)$"
)
#: "I have a new email: ...", "got a new number, 555-0199": a key said to be new, then its value.
_NEW_KEY = rule(
    r"^(?:have|has|got)\s+(?:a\s+)?new\s+(?P<key>[a-z][a-z -]*?)\s*(?::|,|\s-|\s+(?:which\s+)?is)\s+(?P<value>\S.*)$"
)
#: "joined Wipro as an engineer": an employer, told by the job taken there.
_JOINED_AS = rule(r"^joined\s+(?P<value>.+?)\s+as\s+(?P<job>.+)$")
#: "Berlin is home now": where the speaker lives, told the other way round.
_IS_HOME = rule(r"^(?P<value>.+?)\s+is\s+(?:now\s+)?(?:my\s+|our\s+)?home(?:\s+now|\s+these\s+days)?$")
_PLACE = LazyPattern(rf"(?:the\s+)?{NAME}(?:,?\s+{NAME})?")
#: "changed my major to civil engineering", "updated my email to ...": what the key is now.
_CHANGED_MY = rule(
    r"^(?:have\s+|has\s+)?(?:changed|switched|updated|raised|lowered|increased|cut)\s+(?:my|his|her|their|our)\s+(?P<key>[a-z -]+?)\s+to\s+"
    r"(?P<value>\S.*)$"
)


def frame_facts(rest: str, lowercase_text: bool) -> list[Found]:
    """Shapes read before the others, whose words another rule would misread ("like my coffee
    black" is how, not an opinion of "my coffee black")."""
    if (m := _HOW.match(rest)) and relationships.canonical(m["thing"]) is None:  # not "take my kids ..."
        return [Found("how:" + m["thing"].lower(), m["value"])]
    if m := _PREFERS.match(rest):
        return [Found("preference:" + m["thing"].lower(), m["value"])]
    if m := _FEELS.match(rest):
        positive = m["feeling"].lower() == "fond"
        return [Found("opinion:" + m["value"], "positive" if positive else "negative")]
    school = (m := _STUDIES_AT.match(rest)) and m["school"]
    if m and school and school.lower() not in NOT_EMPLOYERS and looks_like_proper_noun(school, lowercase_text):
        return [Found("major", m["field"]), Found("school", school)]  # not "study French at night"
    if m := _NEW_KEY.match(rest):
        return possessive_facts(f"{m['key']} is {m['value']}")
    if (m := _JOINED_AS.match(rest)) and (job := job_value(m["job"])):
        return [Found("employer", m["value"]), Found("job", job)]
    if m := _CHANGED_MY.match(rest):
        return possessive_facts(f"{m['key']} is {m['value']}")
    return []


def is_phone(value: str) -> bool:
    """A phone number: 7 to 15 digits with the usual separators and nothing else."""
    return re.fullmatch(PHONE, value) is not None and 7 <= sum(c.isdigit() for c in value) <= 15


def contact_key(value: str) -> str | None:
    """ "email" or "phone" by what ``value`` is, else None (a time, a place, a name)."""
    if re.fullmatch(EMAIL, value):
        return "email"
    return "phone" if is_phone(value) else None


def speaker_facts(clause: str) -> list[Found]:
    """What a whole clause says of the speaker: "Berlin is home now"; the address in "(you can)
    reach me at <address>", "text me on <number>", by what the value is (nothing for "call me
    at 5" or "find me at the bar")."""
    if (m := _IS_HOME.match(clause)) and _PLACE.fullmatch(m["value"]):  # not "where I grew up is home"
        return [Found("residence", m["value"], changed=True)]
    if m := _USE_ADDRESS.match(clause):
        return [Found("email", m["value"])]
    for pattern in (_CONTACT, _BEST_WAY):
        if (m := pattern.match(clause)) and (key := contact_key(value := m["value"].rstrip(".,"))):
            if pattern is _CONTACT and m["verb"].casefold().endswith(("ed", "s")):
                continue  # "emailed me at", "texts me on": someone else did it, not an imperative
            return [Found(key, value)]
    return []


def transition_facts(rest: str, lowercase_text: bool) -> list[Found]:
    """What the predicate ``rest`` (subject and negation removed) states, by these shapes."""
    if m := _MOVED_ADDRESS.match(rest):
        return [Found("email", m["value"])]
    if m := _STARTED_DATING.match(rest):
        partner = [Found("partner_name", m["partner"])] if m["partner"] else []
        return [Found("relationship_status", "dating"), *partner]
    if m := _BROKE_UP.match(rest):
        return status_facts("single", m["partner"])
    if m := _HAS_PARTNER.match(rest):
        return [
            Found("relationship_status", "married" if m["rel"].lower() in ("wife", "husband") else "in a relationship")
        ]
    if m := _TIED_THE_KNOT.match(rest):
        return status_facts("married", m["partner"])
    if m := _QUIT_EMPLOYER.match(rest):  # "I quit Airbnb": no longer there ("I quit smoking" names nobody)
        return [Found("employer", m["value"], negated=True)]
    if (m := _MOVED_INTO.match(rest)) and looks_like_proper_noun(m["value"], lowercase_text):
        return [Found("residence", m["value"], changed=True)]
    if _EATS_FISH.match(rest):  # a whole kind, as "eats meat": not "eats chicken" (after "no pork")
        return [Found("diet", "pescatarian")]
    if m := _DIET_RETURN.match(rest):
        return [Found("diet", "pescatarian" if m["food"].lower() in ("fish", "seafood") else "omnivore")]
    if m := _TO_BE_CALLED.match(rest):
        return [Found("nickname", m["value"])]
    if m := _TIMEZONE.match(rest):
        return [Found("timezone", m["value"] + " time")]
    if (m := _HOME_IS.match(rest)) and looks_like_proper_noun(m["value"], lowercase_text):
        return [Found("residence", m["value"], changed=True)]
    return []


def couple_facts(clause: str) -> list[Found] | None:
    """The speaker's status in "<partner> and I <got married | split up ...>", or None."""
    if not (m := COUPLE.match(clause)):
        return None
    status = _COUPLE_STATUS.match(TRAILING.sub("", m["rest"] or m["rest2"]))
    if not status:
        return None
    value = status["value"].lower()
    value = value.removeprefix("been ").removeprefix("a ").removeprefix("an ")
    value = {"broke": "single", "split": "separated", "tied": "married", "hitched": "married", "wed": "married"}.get(
        value.split()[0], value
    )
    if value in ("together", "item", "couple"):
        value = "in a relationship"
    partner = m["partner"] or m["partner2"] or m["partner3"]
    return status_facts(value, partner)
