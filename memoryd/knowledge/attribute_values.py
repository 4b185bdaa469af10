"""How an attribute's key and value are written down, so that two wordings of one fact compare
equal: favorite:Foods -> favorite:food, favorite:colour -> favorite:color, "Acme Corp, since
2020" -> acme corp.
"""

from __future__ import annotations

import re

from memoryd.knowledge.trailing import TRAILING as _TRAILING

#: Spellings and synonyms of one favourite: "favourite writer" is "favorite author".
_SPELLING = {
    "colour": "color",
    "favourite": "favorite",
    "tv": "tv",
    "flavour": "flavor",
    "writer": "author",
    "novelist": "author",
    "film": "movie",
}


def normalise_key(key: str) -> str:
    head, sep, thing = key.partition(":")
    if not sep or not head.startswith("favorite") and head != "opinion":
        return key.casefold()
    words = [_SPELLING.get(w, w) for w in _TRAILING.sub("", thing).casefold().split()]
    if head != "opinion" and words:  # "favorite foods" and "favorite food" are one key
        words[-1] = _singular(words[-1])
    return f"{head}:{' '.join(words)}" if head != "opinion" else "opinion:" + normalise_value(" ".join(words))


_IES_WORDS = frozenset("movies cookies pies series species ties lies brownies smoothies zombies calories".split())


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4 and word not in _IES_WORDS:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def normalise_value(value: str) -> str:
    """ "Acme Corp, since 2020" -> "acme corp"; "the Netherlands" -> "netherlands"."""
    value = re.split(r"\s*(?:,|;|\s-\s|\bbecause\b|\bbut\b|\bsince\b|\bwhere\b|\bwhich\b)", value, maxsplit=1)[0]
    value = _TRAILING.sub("", value.strip()).casefold().strip(" .!?'\"")
    value = re.sub(r"^(?:a|an|the)\s+", "", value)
    return " ".join(value.split())


def verb_stem(verb: str) -> str:
    """ "drives" -> "drive", "studies" -> "study", "watches" -> "watch": "I drive" and "Ren
    drives" hold one verb."""
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if verb.endswith(("ches", "shes", "sses", "xes", "zes", "oes")):
        return verb[:-2]
    if verb.endswith("s") and not verb.endswith(("ss", "us", "is")) and len(verb) > 3:
        return verb[:-1]
    return verb


#: What kind of value a note holds, by its form: a time and a room are not two values of one
#: thing ("the meeting is at 3pm", "the meeting moved to Room 4").
_VALUE_TYPES = (
    ("email", re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    ("url", re.compile(r"(?:https?://|www\.)\S+")),
    ("time", re.compile(r"\d{1,2}(?::\d{2})?\s*(?:[ap]\.?m\.?)|\d{1,2}:\d{2}|noon|midnight")),
    (
        "day",
        re.compile(
            r"(?:on\s+)?(?:mon|tues|wednes|thurs|fri|satur|sun)days?(?:\s+and\s+\w+days?)?|"
            r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?|"
            r"\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
        ),
    ),
    ("phone", re.compile(r"\+?\(?\d[\d ().-]{5,}\d")),
    (
        "amount",
        re.compile(
            r"[$€£¥]\s?[\d,.]+\s*[km]?(?:\s+(?:a|per|an)\s+\w+)?|[\d,.]+\s*(?:dollars|euros|pounds|usd|eur|gbp)"
        ),
    ),
    ("number", re.compile(r"[-+]?\d[\d,.]*\s*(?:%|[a-z]+(?:/[a-z]{1,3})?|°\w?)?")),  # "40 minutes", "300 mbps"
)


_LEADING_PREPOSITION = re.compile(r"(on|in|at|near|by|with|next\s+to|behind|above|below|under|for|from)\s+")


def value_type(value: str) -> str:
    """ "time", "day", "email", "phone", "url", "amount", "number", else "text"; a value led by
    a preposition other than a time's is of the kind it names ("on the 3rd floor" is "on",
    "near the station" "near": two facets of an office, not two places)."""
    value = value.strip().casefold()
    for name, pattern in _VALUE_TYPES:
        if pattern.fullmatch(value):
            return name
    lead = _LEADING_PREPOSITION.match(value)
    return "text " + lead[1] if lead else "text"


def same_kind(old: str, new: str) -> bool:
    """Could ``new`` be the value ``old`` had before? Of one kind, or text where only one says
    by its preposition what it is ("with Geico", then "Progressive")."""
    old_type, new_type = value_type(old), value_type(new)
    return (
        old_type == new_type
        or "text" in (old_type, new_type)
        and old_type.startswith("text") == new_type.startswith("text")
    )
