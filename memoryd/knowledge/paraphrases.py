"""Ways of telling a change that say, in other words, what one of the attribute rules reads:
written back into that statement before the rules see the text.

"I've changed my number, it's 0782 ..." says "my number is 0782 ..."; "got the keys to our
house in Edinburgh" says "moved into our house in Edinburgh"; "celebrated her 17th birthday"
says "turned 17"; "email → sam@example.com" is the note "email: sam@example.com".  Each rewrite
is a shape (a verb of change, a value of a known type, a note's separator), not a list of
sentences, and keeps what it does not understand as it was: a text no shape fits is returned
unchanged, so the rules decide exactly as before.

Every rewrite sits behind a cheap test of the words it needs (most texts have none of them).
"""

from __future__ import annotations

import re

from memoryd.knowledge.attribute_rules import NAME, job_value
from memoryd.lazy import LazyPattern

_DWELLING = r"(?:place|flat|house|apartment|home|condo|studio|bungalow|cottage)"
#: A home that is not where one lives: "our holiday house in Spain".
_NOT_HOME = r"(?!(?:holiday|summer|beach|rental|second|weekend|ski)\b)"

#: "<verb of change> my <key>, it is <value>": the key's value now ("I've changed my number,
#: it's 0782 ...", "reset the alarm code - the new one is 3107").
_CHANGED_KEY_IT_IS = LazyPattern(
    r"\b(?:have\s+|has\s+)?(?:changed|reset|updated|switched)\s+(?P<own>my|our|the)\s+(?P<key>[a-z][a-z -]{1,30}?)\s*"
    r"(?:,|;|-+|:)\s*(?:and\s+)?(?:it\s+is|the\s+new\s+one\s+is|new\s+one\s+is)\s+(?P<value>\S.*)$",
    re.IGNORECASE,
)
#: A note's key and value split by "=", "->", "→" or " - " ("home = Rotterdam", "title - Sr.
#: Account Manager"): the note "<key>: <value>".
_NOTE_SEPARATOR = LazyPattern(
    r"^(?!(?i:i|we|he|she|they|you|it)\b)(?P<key>[A-Za-z][a-z]*(?:\s+[a-z]+){0,3})(?<!ed)\s*(?:=|->|→|\s-+)\s*"
    r"(?P<value>[^=→]+)$",
)
#: A terse note of a key and a code or time, without a separator: "bike lock combo 4-1-9-9",
#: "kids pickup 3:15pm".  Only a key whose last word names a code or a time (``_TERSE_HEADS``)
#: and a value that is one (digits with separators, three digits or more, "7pm"): items of a
#: sequence ("b note 6", "load fact 3-12", "chapter 4.2") are no note.
_TERSE_NOTE = LazyPattern(
    r"^(?P<key>[a-z]{3,}(?:\s+[a-z]{3,}){1,3})\s+(?P<value>\d[\d]*[:.\-/][\d:.\-/]*\d(?:\s*[ap]\.?m\.?)?|\d{3,}|"
    r"\d{1,2}(?:[:.]\d\d)?\s*[ap]\.?m\.?)$",
    re.IGNORECASE,
)
#: "pickup's 3.40 now", "dmitri's 42": before a number "'s" is "is", never a possessive.
_IS_BEFORE_NUMBER = LazyPattern(r"(?<=[a-z])'s\s+(?=\d)", re.IGNORECASE)
#: "celebrated her 17th birthday": turned 17.
_BIRTHDAY_ORDINAL = LazyPattern(
    r"\b(?:celebrated|had|marked)\s+(?:my|his|her|their|our)\s+(?P<age>\d{1,3})(?:st|nd|rd|th)\s+birthday\b",
    re.IGNORECASE,
)
#: "got the keys to our house in Edinburgh (and moved in)": moved into it.
_GOT_THE_KEYS = LazyPattern(
    r"\bgot\s+the\s+keys\s+(?:to|for)\s+(?P<home>(?:our|my|his|her|their|the|a)\s+(?:new\s+)?"
    + _NOT_HOME
    + r"(?:\w+\s+)?"
    + _DWELLING
    + r")\s+in\s+(?P<place>[^,.;]+?)(?:\s+and\s+moved\s+in\b[^,.;]*)?(?=$|[,.;])",
    re.IGNORECASE,
)
#: "renting a flat in Glasgow", "lives in a flat in Swansea": where one lives, the dwelling aside.
_DWELLING_IN = LazyPattern(
    r"\b(?P<verb>renting|rents?|living|lives?|live|staying|stays?)\s+(?:in\s+)?(?:a|an|the|our|my|his|her|their)\s+"
    r"(?:\w+\s+)?" + _DWELLING + r"\s+in\s+(?=[A-Z])",
)
_DWELLING_VERB = {"renting": "living", "rents": "lives", "rent": "live", "staying": "living", "stays": "lives"}
#: "got bumped up to", "been made": promoted to.
_BUMPED_UP = LazyPattern(r"\b(?:got|was|were|been)\s+(?:bumped\s+up|moved\s+up|made\s+up)\s+to\b", re.IGNORECASE)
#: "new mobile no. +44 ...": a note of the phone number ("no." ends no clause here).
_NEW_PHONE_NOTE = LazyPattern(
    r"^(?:my\s+)?new\s+(?P<key>mobile|mob|cell|phone)(?:\s+(?:no\.?|number|#))?\s*:?\s*(?=\+?\(?\d)", re.IGNORECASE
)
#: "Please send anything for us to 2207 N. Halsted St": where post goes is the address.
_SEND_TO = LazyPattern(
    r"^(?:please\s+|pls\s+)?(?:send|forward|post)\s+(?:anything|everything|all|any|post|mail|letters|packages|parcels)"
    r"(?:\s+\w+)?(?:\s+for\s+(?:us|me))?\s+to\s+(?=\d)",
    re.IGNORECASE,
)
#: A note of a person and their job or age: "Uma - senior nurse, St Thomas'", "Dmitri, 41".
_PERSON_NOTE = LazyPattern(
    r"^(?P<name>"
    + NAME
    + r")\s*(?:,\s*(?P<age>\d{1,3})$|(?:-+|:|,)\s*(?:(?P<year>(?:year|grade)\s+\d{1,2})\s*(?:@|at)\s*"
    r"(?P<school>[^,]+)|(?P<job>[a-z][a-z -]+?)(?:,\s*(?P<place>[^,]+))?)$)"
)
#: "The user says they'll vote Lib Dem from now on": what the user does now, said of them.
_SAYS_THEY = LazyPattern(
    r"^(?P<who>the\s+user)\s+(?:says|said|mentioned|mentions)\s+(?:that\s+)?(?:they|he|she)\s+", re.I
)
#: "will vote Lib Dem from now on": a habit that starts now, said as what is done now.
_WILL_FROM_NOW_ON = LazyPattern(
    r"^(?P<who>I|we|the\s+user|" + NAME + r")\s+(?:will|shall)\s+(?P<act>[a-z]+\b.*?)\s+from\s+now\s+on\b",
    re.IGNORECASE,
)
#: "Uma retired in August", "I've just retired": no job now (not "retired the old laptop").
_RETIRED = LazyPattern(
    r"^(?P<who>" + NAME + r"|I|we|he|she)\s+(?:has\s+|have\s+|just\s+|finally\s+)*retired"
    r"(?:\s+(?:in|on|last|this|at)\s+[\w-]+)?(?=\s*(?:$|[,.;!]))"
)
#: "I take 20 mg of citalopram": the dose of citalopram; "my doctor raised my citalopram dose to
#: 30 mg": what it is now, whoever changed it.
_TAKES_DOSE = LazyPattern(
    r"^(?:I\s+)?(?:take|am\s+taking|am\s+on)\s+(?P<amount>\d[\d.]*\s*(?:mg|mcg|µg|g|ml|units?|iu))\s+(?:of\s+)?"
    r"(?P<drug>[a-z][a-z-]+)",
    re.IGNORECASE,
)
_RAISED_MY = LazyPattern(
    r"^(?:my|our|the|her|his)\s+[a-z]+\s+(?:has\s+|just\s+)?(?:raised|lowered|increased|reduced|cut|upped|changed|"
    r"adjusted|doubled|halved)\s+(?P<own>my|our)\s+(?P<key>[a-z][a-z -]*?)\s+to\s+(?=\S)",
    re.IGNORECASE,
)
#: "Tariq is seeing someone new, a nurse called Amani": Tariq's partner is Amani.
_SEEING_SOMEONE = LazyPattern(
    r"^(?P<who>" + NAME + r"|I)\s+(?:is|am)\s+(?:now\s+)?(?:seeing|dating|with)\s+(?:someone|somebody)(?:\s+new)?,?\s+"
    r"(?:an?\s+[a-z]+\s+)?(?:called|named)\s+(?=" + NAME + r"\b)"
)
#: "..., so please email me at ..." : the request is a clause of its own.
_SO_PLEASE = LazyPattern(r",\s+(?:so\s+)?(?=(?:please|pls|plz|just)\s+[a-z]+\s+me\b)", re.IGNORECASE)


#: Words no key of a terse note holds: "my locker number is 214" and "turned 42" are sentences.
_NOT_KEY_WORDS = frozenset(
    "i we you he she they it my our his her their is are am was were be been has have had turned at to on in "
    "by for now since after from of with the a an just".split()
)


#: What a code or a time is called: the last word of a terse note's key.
_TERSE_HEADS = frozenset("code combo combination pin passcode password pickup dropoff bedtime curfew alarm".split())


def _is_key(words: list[str]) -> bool:
    """Words that may be a terse note's key: a code's or a time's name, no verb of a sentence
    ("called mum 3 times")."""
    return words[-1] in _TERSE_HEADS and not any(w in _NOT_KEY_WORDS or w.endswith(("ed", "ing")) for w in words)


def rewritten(text: str) -> str:
    """``text`` (straightened, contractions written out) with the shapes above said the way
    the attribute rules read them; unchanged when none fits."""
    lowered = text.casefold()
    if "'s " in text:
        text = _IS_BEFORE_NUMBER.sub(" is ", text)
    if ("changed" in lowered or "reset" in lowered or "updated" in lowered or "switched" in lowered) and (
        m := _CHANGED_KEY_IT_IS.search(text)
    ):
        own = "my" if m["own"].casefold() == "my" else m["own"].casefold()
        text = f"{text[: m.start()].rstrip(' ,;')}{'. ' if m.start() else ''}{own} {m['key']} is {m['value']}"
        text = re.sub(r"^(?:I|we|you|they)\.\s+", "", text)  # the subject alone says nothing
    if (m := _PERSON_NOTE.match(text)) and (m["age"] or m["year"] or (m["job"] and job_value(m["job"]))):
        if m["year"]:
            return f"{m['name']} is in {m['year']} at {m['school']}"
        at = f" at {m['place']}" if m["place"] else ""
        return f"{m['name']} is {m['age']}" if m["age"] else f"{m['name']} is a {m['job']}{at}"
    if "say" in lowered or "said" in lowered or "mention" in lowered:
        text = _SAYS_THEY.sub(r"\g<who> ", text)
    if "from now on" in lowered:
        text = _WILL_FROM_NOW_ON.sub(r"\g<who> \g<act> now", text)
    if "retired" in lowered and (m := _RETIRED.match(text)):
        rest = text[m.end() :].lstrip(" ,;")
        text = f"{m['who']} is retired" + (f". {rest}" if rest else "")
    if (m := _TAKES_DOSE.match(text)) and m["drug"].casefold() not in ("the", "my", "a"):
        return f"my {m['drug']} dose is {m['amount']}"
    if m := _RAISED_MY.match(text):
        text = f"{m['own']} {m['key']} is {text[m.end() :]}"
    if ("seeing" in lowered or "dating" in lowered) and (m := _SEEING_SOMEONE.match(text)):
        whose = "my" if m["who"] == "I" else m["who"] + "'s"
        text = f"{whose} partner is called {text[m.end() :]}"
    if "new" in lowered and (m := _NEW_PHONE_NOTE.match(text)):
        text = f"my new {m['key']} number is {text[m.end() :]}"
    elif m := _NOTE_SEPARATOR.match(text):
        text = f"{m['key']}: {m['value']}"
    elif (m := _TERSE_NOTE.match(text)) and _is_key(m["key"].casefold().split()):
        text = f"{m['key']}: {m['value']}"
    if "birthday" in lowered:
        text = _BIRTHDAY_ORDINAL.sub(r"turned \g<age>", text)
    if "keys" in lowered:
        text = _GOT_THE_KEYS.sub(r"moved into \g<home> in \g<place>", text)
    if " in " in text and ("rent" in lowered or "liv" in lowered or "stay" in lowered):
        text = _DWELLING_IN.sub(lambda m: _DWELLING_VERB.get(m["verb"].casefold(), m["verb"]) + " in ", text)
    if "up to" in lowered:
        text = _BUMPED_UP.sub("got promoted to", text)
    if "send" in lowered or "forward" in lowered or "post " in lowered:
        text = _SEND_TO.sub("our address is ", text)
    if "me " in lowered and "," in text:
        text = _SO_PLEASE.sub(". ", text)
    return text
