"""Attributes no named rule knows: an open vocabulary of keys, read from the sentence's shape.

The named rules (``attribute_rules.py``) know employers, homes, favorites and the like.  Notes
also set attributes nobody listed, in two shapes this module reads when no named rule matched:

* a key and a value: "Phone number: 555-0142", "Noor's manager is Felix", "Wifi password is
  tangerine77", "Alarm is set for 6:45", "The user switched gyms to Third Space".  The key is
  the noun phrase itself (``kv:phone number``), the subject its possessor.  Notes replace: the
  same key of the same subject with another value is a change.
* a subject, a verb and an object: "Ren drives a Honda Civic", "Tomás is employed by Initech".
  The key is the verb phrase (``did:drives``).  Verbs hold several objects at once ("plays the
  violin", "plays the piano"), so only a newer statement that says it changed ("now", "these
  days", "instead", "no longer") replaces the older one (``Attribute.changed``), and only
  with a subject named ("written before the lock" names nobody).

What stays out, so a wrong supersession does not hide a true fact: plural keys and keys of
things people have several of ("hobby", "friend", "brother"); "one of", "another", "also";
hedges ("might", "thinking about"); past tense ("was", "used to", "adopted"); bare one-word
keys that may be a name ("Sarah is kind"), unless the value is a number, time or code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.knowledge.attribute_values import verb_stem
from memoryd.lazy import LazyPattern

#: Key prefixes of the two shapes.
KEY_VALUE = "kv:"
VERB_OBJECT = "did:"
#: Filing key of a verb-object statement that says it changed (``attributes.attribute_keys``).
CHANGED_PREFIX = "did+:"

#: Words (and phrases) of a newer statement saying its value changed.  Word sets, not
#: regexes: every add without a named attribute reads them (a case-insensitive alternation
#: cost ~30 us a clause; a set lookup per word ~1 us).
_CHANGED = frozenset("now nowadays anymore instead switched changed".split())
_CHANGED_PHRASES = ("these days", "from now on", "no longer", "any more")
#: What is stripped from a value: when-words and reasons, not part of it.
_VALUE_TAIL = LazyPattern(
    r"(?:\s*,)?\s+(?:now|these\s+days|nowadays|at\s+the\s+moment|from\s+now\s+on|instead|again|"
    r"(?:since|after|because|following)\b.*)$",
    re.IGNORECASE,
)
_TAIL_WORDS = ("now", "days", "moment", "instead", "again", "since", "after", "because", "following")
_VALUE_HEAD = LazyPattern(r"^(?:now|currently|still|around|about|roughly|approximately)\s+", re.IGNORECASE)
_HEDGE = frozenset(
    "might may maybe perhaps could would should thinking considering planning plan plans want wants hope hopes "
    "hoping wish wishes if tried trying interview offer was were had did will soon next".split()
)
_HEDGE_PHRASES = ("used to", "going to")
_ADDITIVE = frozenset("also too another second other both either".split())
_ADDITIVE_PHRASES = ("as well", "one of")
#: Things people have several of: a new one is added, not a replacement.
_MULTI = frozenset(
    "hobby interest friend pet allergy skill sport instrument sibling brother sister cousin child kid son daughter "
    "colleague neighbour neighbor grandchild aunt uncle nephew niece habit language goal dream".split()
)
#: Adjectives that make a noun of several single: "preferred language", "main hobby".
_UNIQUE = frozenset("preferred primary main native current usual only first best default home".split())
_AUXILIARIES = frozenset(
    "is are am was were be been being has have had do does did will would shall should can could may might must "
    "also not never no just still really usually often always sometimes already".split()
)
_PREPOSITIONS = frozenset("by at in for with on to from as into".split())
#: Before a verb they say when, not what is done: "I now drive a Civic" reads as "I drive a Civic".
_WHEN_ADVERBS = frozenset("now currently nowadays".split())
#: Before a key they mark the value as the latest: "my new phone number" is "my phone number".
_LATEST = frozenset("new latest updated".split())
_DETERMINERS = frozenset("it this that there these those he she they we you i here what who which".split())

_NAME = r"(?:[A-Z][\w\-]*(?:\s+[A-Z][\w\-]*){0,2})"
#: "We" speaks for the speaker's household, as "our" does ("We changed the wifi password to ...").
_SELF_WORDS = r"(?:the\s+user|i|me|myself|we)"
#: "Noor's", "the user's", "Parents'", "my": a possessor at the start of a clause.
_POSSESSOR = re.compile(rf"^(?P<owner>{_NAME}|the\s+user|my|our|(?:[A-Za-z]+s))(?:'s|')?\s+", re.IGNORECASE)
_KEY = r"(?P<key>[A-Za-z][\w\-']*(?:\s+[A-Za-z][\w\-']*){0,5}?)"
_NOTE = re.compile(rf"^{_KEY}\s*:\s+(?P<value>\S.*)$")
_IS = re.compile(
    rf"^{_KEY}\s+(?:is|=)\s+(?:now\s+)?(?:called\s+|named\s+|(?:set|booked|scheduled|due)\s+(?:for|to|on)\s+|at\s+)?(?P<value>\S.*)$"
)
_SWITCH = re.compile(
    r"^(?:switched|changed|moved|raised|lowered|increased|decreased|cut|bumped|updated)\s+(?:(?:my|his|her|their|the|our)\s+)?(?P<key>[a-z]+?(?:\s+[a-z]+?){0,2}?)(?:e?s)?"
    r"\s+to\s+(?P<value>\S.*)$",
    re.IGNORECASE,
)
#: "<key> changed to <value>", "<key> went up to <value>", "<key> moved to <value>": a key-value
#: note that says the value changed.
_CHANGED_TO = re.compile(
    rf"^{_KEY}\s+(?:now\s+)?(?:has\s+|have\s+)?(?:changed|switched|moved|went\s+(?:up|down)|gone\s+(?:up|down)|"
    r"increased|decreased|dropped|rose|risen|jumped|upgraded|downgraded|raised|lowered|reduced|updated|reset|"
    r"bumped(?:\s+up)?)\s+to\s+(?P<value>\S.*)$",
    re.IGNORECASE,
)
#: "was upgraded to", "has been changed to": the passive of a change says what the value is now
#: (read before the past tense keeps a clause out).
_PASSIVE_CHANGE = re.compile(
    r"\b(?:was|were|has\s+been|have\s+been|got|just\s+got)\s+(?=(?:changed|switched|moved|upgraded|downgraded|"
    r"raised|lowered|increased|decreased|reduced|updated|reset|bumped)\s+(?:up\s+)?to\b)",
    re.IGNORECASE,
)
#: "<key> starts at 9:30", "<key> goes off at 7:15": when something is, a key-value note when the
#: value is a time; an end ("closes at") is a key of its own.
_AT_TIME = re.compile(
    rf"^{_KEY}\s+(?:now\s+)?(?P<verb>goes\s+off|starts|begins|opens|kicks\s+off|leaves|departs|ends|closes|finishes)\s+"
    r"(?:at|from)\s+(?P<value>\d\S*(?:\s*[ap]\.?m\.?)?)(?:\s+(?:now|these\s+days|instead))?$",
    re.IGNORECASE,
)
_ENDS = ("ends", "closes", "finishes")
_WORD = re.compile(r"[a-z']+")
_MONTH_MAY = re.compile(r"\bmay\s+(?=\d)")
_CLAUSES = re.compile(
    r";|(?<!\bDr)(?<!\bMr)(?<!\bMs)(?<!\bMx)(?<!\bMrs)(?<!\bProf)(?<!\b[A-Z])\.\s|,?\sand\s(?=[a-z])|,?\sbut\s"
)
_SELF_SUBJECT = re.compile(rf"^{_SELF_WORDS}\s+(?=[a-z])", re.IGNORECASE)
_MY = re.compile(r"^(?:my|our|the\s+user's)\s+", re.IGNORECASE)
_NAME_POSSESSIVE = re.compile(rf"^(?P<owner>{_NAME})(?:'s|')\s+")
_NAME_SUBJECT = re.compile(rf"^(?P<owner>{_NAME})\s+(?=[a-z])")


@dataclass(frozen=True)
class OpenFact:
    key: str  # "kv:phone number", "did:drives"
    value: str
    owner: str  # "" for the speaker, else the possessor or subject phrase ("Noor", "Kenji's partner")
    changed: bool = False


def open_facts(text: str) -> list[OpenFact]:
    """The open-vocabulary attributes of ``text`` (see the module docstring), in order."""
    facts: list[OpenFact] = []
    subject: str | None = None
    for clause in _CLAUSES.split(text.strip().rstrip(".!?… ")):
        clause = _PASSIVE_CHANGE.sub("", clause.strip())
        lowered = f" {clause.casefold()} "
        words = set(_WORD.findall(_MONTH_MAY.sub(" ", lowered)))  # "May 3" is a date, not a hedge
        if not clause or words & _HEDGE or words & _ADDITIVE or _has(lowered, _HEDGE_PHRASES + _ADDITIVE_PHRASES):
            continue
        changed = bool(words & _CHANGED) or _has(lowered, _CHANGED_PHRASES)
        fact, subject = _clause_fact(clause, subject, changed)
        if fact is not None:
            facts.append(fact)
    return facts


def _has(lowered: str, phrases: tuple[str, ...]) -> bool:
    return any(f" {phrase}" in lowered for phrase in phrases)


def _clause_fact(clause: str, inherited: str | None, changed: bool) -> tuple[OpenFact | None, str | None]:
    """The clause's fact, and the subject a following clause without one inherits (only a
    subject the clause named: "Ren sold the Civic and drives a Tesla now")."""
    if m := _NOTE.match(clause):
        possessor, key = _possessed(m["key"])
        return _key_value(possessor, key, m["value"], changed, note=True), None
    owner: str | None
    if inherited is not None and clause[:1].islower():
        owner, rest, named = inherited, clause, True
    else:
        owner, rest = _subject_of(clause)
        named = rest is not clause  # a bare clause ("Bedtime is 11pm") names no subject
    if owner is None:
        return None, None
    if m := _SWITCH.match(rest):
        return _key_value(owner, m["key"], m["value"], True, note=True), owner if named else None
    if (m := _CHANGED_TO.match(rest) or _AT_TIME.match(rest)) and (named or _looks_like_value(m["value"])):
        sub_owner, key = _possessed(m["key"])
        full_owner = owner if not sub_owner else (f"{owner}'s {sub_owner}" if owner else sub_owner)
        if m.re is _AT_TIME and m["verb"].casefold() in _ENDS:
            key += " end"
        return _key_value(full_owner, key, m["value"], True, note=named), owner if named else None
    if m := _IS.match(rest):
        sub_owner, key = _possessed(m["key"])
        full_owner = owner if not sub_owner else (f"{owner}'s {sub_owner}" if owner else sub_owner)
        if named or sub_owner or " " in key.strip() or _looks_like_value(m["value"]):
            return _key_value(full_owner, key, m["value"], changed, note=named), owner if named else None
        return None, None
    if not named:
        return None, None  # a verb and an object need someone doing it ("written before the lock")
    return _verb_object(owner, rest, changed), owner


def _subject_of(clause: str) -> tuple[str | None, str]:
    """("Noor's manager is Felix") -> ("Noor", "manager is Felix"); ("Ren drives a car") ->
    ("Ren", "drives a car"); ("Bedtime is 11pm") -> ("", "Bedtime is 11pm")."""
    if m := _SELF_SUBJECT.match(clause):
        return "", clause[m.end() :]
    if m := _MY.match(clause):
        return "", clause[m.end() :]
    if m := _NAME_POSSESSIVE.match(clause):
        return _owner_name(m["owner"]), clause[m.end() :]
    if m := _NAME_SUBJECT.match(clause):
        first = m["owner"].split()[0].casefold()
        if (
            first not in _DETERMINERS
            and first != "the"
            and not any(p.match(clause) for p in (_IS, _CHANGED_TO, _AT_TIME))
        ):
            return _owner_name(m["owner"]), clause[m.end() :]
    if clause[:1].isalpha() and clause.split()[0].casefold() not in _DETERMINERS:
        return "", clause  # a bare note: "Bedtime is around 11pm"
    return None, clause


def _owner_name(name: str) -> str:
    return "" if name.casefold() in ("the user", "i") else name


def _possessed(key: str) -> tuple[str, str]:
    """("Parents' address") -> ("parents", "address"); ("Kenji's partner's sister") ->
    ("Kenji's partner", "sister"); ("home address") -> ("", "home address")."""
    parts = re.split(r"(?:'s|s')\s+", key)
    if len(parts) == 1:
        return "", key
    owner = "'s ".join(parts[:-1])
    if key[len(owner) :].startswith("s'"):
        owner += "s"
    if owner.casefold() in ("the user", "my", "i"):
        owner = ""
    return owner, parts[-1]


def _key_value(owner: str, key: str, value: str, changed: bool, *, note: bool) -> OpenFact | None:
    key = " ".join(key.casefold().replace("favourite", "favorite").replace("colour", "color").split())
    words = key.split()
    if len(words) > 1 and words[0] in ("the", "my", "our"):  # "The office code is 1234": "office code"
        words = words[1:]
    if len(words) > 1 and words[0] in _LATEST:
        words = words[1:]
    key = " ".join(words)
    if not words or len(words) > 6 or words[0] in ("a", "an", "one", "another", "some", "any", "no"):
        return None
    head_index = next((i for i, word in enumerate(words) if word in _PREPOSITIONS | {"of"}), len(words)) - 1
    if head_index < 0 or words[0] == "favorite":
        return None  # "favorite X" is the named rules' (a favorite part, scene, song depends on what of)
    head = words[head_index]
    if head in _MULTI and not (head_index > 0 and words[head_index - 1] in _UNIQUE):
        return None  # "brother", "language": several at once; "native language", "preferred language": one
    if head.endswith("s") and not head.endswith(("ss", "us", "is")):
        return None
    if not note and len(words) == 1 and not _looks_like_value(value):
        return None
    cleaned = _clean_value(value)
    if not cleaned:
        return None
    return OpenFact(KEY_VALUE + key, cleaned, owner, changed)


def _verb_object(owner: str, rest: str, changed: bool) -> OpenFact | None:
    words = rest.split()
    while words and words[0].casefold() in _WHEN_ADVERBS:
        words = words[1:]
    if len(words) < 2:
        return None
    first = words[0].casefold()
    if first in ("is", "are", "am") and len(words) >= 3 and words[1].casefold().endswith("ed"):
        verb = [first, words[1].casefold()]  # "is employed by"
    elif first in _AUXILIARIES or not first.isalpha() or first.endswith(("ed", "ly")) or len(first) < 3:
        return None
    else:
        verb = [verb_stem(first)]
    position = len(verb)
    if position < len(words) and words[position].casefold() in _PREPOSITIONS:
        verb.append(words[position].casefold())
        position += 1
    obj = " ".join(words[position:])
    if not obj or obj.casefold().startswith("to "):
        return None
    cleaned = _clean_value(obj)
    if not cleaned:
        return None
    return OpenFact(VERB_OBJECT + " ".join(verb), cleaned, owner, changed)


def _clean_value(value: str) -> str:
    value = _VALUE_HEAD.sub("", value.strip())
    lowered = value.casefold()
    if any(word in lowered for word in _TAIL_WORDS):  # (the regex costs a scan per position)
        value = _VALUE_TAIL.sub("", value)
    value = value.strip(" ,.;")
    value = re.sub(r"^(?:a|an|the)\s+", "", value, flags=re.IGNORECASE)
    return " ".join(value.casefold().split())


def _looks_like_value(value: str) -> bool:
    """A number, time, amount, address or code: what a one-word key is set to."""
    return bool(re.search(r"\d|@", value))
