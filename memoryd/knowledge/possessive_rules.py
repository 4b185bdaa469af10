"""The possessive rules behind :mod:`memoryd.knowledge.attributes`: what "<owner's> <thing> is
<value>" states ("my favorite color is blue" -> favorite:color=blue, "Sarah's work email is ..."
-> email:work).  Like the predicate rules, a shape they were not written for yields nothing.
"""

from __future__ import annotations

from memoryd.knowledge.attribute_rules import TAIL, Found, rule, split_list
from memoryd.knowledge.attribute_words import CONTEXTUAL_FAVORITES
from memoryd.lazy import LazyPattern

_FAVORITE = rule(
    r"^(?:new\s+|current\s+|all[- ]time\s+|absolute\s+)?favou?rite\s+(?P<thing>[\w -]+?)\s+"
    r"(?P<verb>is|are|=|has\s+always\s+been|has\s+become|became|would\s+be|was|were)\s+" + TAIL
)
_NOTE_FAVORITE = rule(r"^((?:new\s+|current\s+)?favou?rite\s+[\w -]+?)\s*:\s+")
#: Possessive shapes: "<my|Sarah's> <thing> is <value>" -> key.  "{kind}" keys take the
#: optional qualifier ("work email" -> email:work).
_POSSESSED: tuple[tuple[LazyPattern, str], ...] = tuple(
    (rule(pattern), key)
    for pattern, key in (
        (r"^(?:first\s+|full\s+|real\s+|legal\s+|given\s+)?name\s+is\s+" + TAIL, "name"),
        (r"^(?:last\s+name|surname|family\s+name)\s+is\s+" + TAIL, "last_name"),
        (r"^nick\s?name\s+is\s+" + TAIL, "nickname"),
        (r"^age\s+is\s+(?P<value>\d{1,3})$", "age"),
        (r"^(?:birthday|date\s+of\s+birth|birth\s+date|dob)\s+is\s+(?:on\s+)?" + TAIL, "birthday"),
        (r"^(?:(?P<kind>work|personal|school|home)\s+)?e-?mail(?:\s+address)?\s+is\s+" + TAIL, "email"),
        (
            r"^(?:(?P<kind>work|home|personal)\s+)?(?:phone|cell|mobile|mob)(?:\s+phone)?(?:\s+number)?\s+is\s+" + TAIL,
            "phone",
        ),
        (r"^(?:job|occupation|profession|job\s+title|title|role|position)\s+is\s+(?:an?\s+)?" + TAIL, "job"),
        (r"^(?:employer|company|workplace)\s+is\s+" + TAIL, "employer"),
        (r"^hometown\s+is\s+" + TAIL, "hometown"),
        (
            r"^(?:home|house|apartment|flat)\s+is\s+(?:now\s+)?in\s+(?!an?\s)" + TAIL,
            "residence",
        ),  # not "in a quiet street"
        # a note of where one lives: "home: Rotterdam" (a place, capitalised)
        (r"^(?:home|home\s+city)\s+is\s+(?P<value>(?-i:[A-Z])[\w.' -]*)$", "residence"),
        (r"^(?:home\s+|mailing\s+|street\s+)?address\s+is\s+" + TAIL, "address"),
        (r"^nationality\s+is\s+" + TAIL, "nationality"),
        (r"^(?:native\s+language|first\s+language|mother\s+tongue)\s+is\s+" + TAIL, "native_language"),
        (r"^(?:preferred\s+)?pronouns\s+are\s+" + TAIL, "pronouns"),
        (r"^time\s?zone\s+is\s+" + TAIL, "timezone"),
        (r"^blood\s+type\s+is\s+" + TAIL, "blood_type"),
        (r"^(?:zodiac\s+sign|star\s+sign|sign)\s+is\s+" + TAIL, "zodiac_sign"),
        (r"^(?P<kind>shoe|dress|shirt|ring|pants)\s+size\s+is\s+" + TAIL, "size"),
        (r"^diet\s+is\s+(?:an?\s+)?" + TAIL, "diet"),
        (r"^(?:major|field\s+of\s+study)\s+is\s+" + TAIL, "major"),
        (r"^(?:university|college|school)\s+is\s+" + TAIL, "school"),
        (r"^(?:salary|income)\s+is\s+" + TAIL, "salary"),
        (r"^height\s+is\s+" + TAIL, "height"),
        (r"^weight\s+is\s+" + TAIL, "weight"),
    )
)
#: "<key> changed to <value>", "<key> went up to <value>": the value it has now.
_CHANGED_TO = rule(
    r"^(?P<key>[\w -]+?)\s+(?:has\s+|have\s+)?(?:been\s+|was\s+|got\s+)?(?:changed|switched|moved|updated|"
    r"went\s+(?:up|down)|increased|decreased|dropped|rose|jumped)\s+to\s+" + TAIL
)
#: "my number is <phone>": "number" alone is a phone number only when the value is one.
_NUMBER = rule(r"^(?:contact\s+)?(?:number|digits)\s+is\s+(?P<value>\+?\(?\d[\d ().-]{5,}\d)(?:\s+now)?$")
_ALLERGIES = rule(r"^allerg(?:y|ies)\s+(?:is|are|include|includes)\s+" + TAIL)
_LATEST = rule(r"^(?:new|latest|updated)\s+(?=\w+\s)")


def possessive_facts(rest: str) -> list[Found]:
    """What "<owner's> ``rest``" states, e.g. rest = "favorite color is blue"."""
    rest = _NOTE_FAVORITE.sub(r"\1 is ", rest.strip())  # "Favourite film: Paddington 2"
    if (m := _FAVORITE.match(rest)) and m["thing"].split()[0].lower() not in CONTEXTUAL_FAVORITES:
        past = m["verb"].lower() in {"was", "were"}
        return [Found("favorite:" + m["thing"], m["value"], negated=past)]
    if m := _ALLERGIES.match(rest):
        return [Found("allergy", v, multi_valued=True) for v in split_list(m["value"])]
    rest = _LATEST.sub("", rest)  # "my new phone number is ..." sets the phone number
    if m := _CHANGED_TO.match(rest):  # "my number changed to ...": what it is now
        rest = f"{m['key']} is {m['value']}"
    if (m := _NUMBER.match(rest)) and sum(c.isdigit() for c in m["value"]) >= 7:
        return [Found("phone", m["value"])]
    for pattern, key in _POSSESSED:
        if m := pattern.match(rest):
            kind = m.groupdict().get("kind")
            return [Found(f"{key}:{kind.lower()}" if kind else key, m["value"])]
    return []
