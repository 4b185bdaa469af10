"""Offline rules mapping a statement to the attributes it sets: ("my wife", favorite:color, green).

Two statements that set the same single-valued attribute of the same subject conflict (the newer
wins); multi-valued attributes (allergies, languages, several sons' names) coexist.  Whatever the
rules do not recognise yields no attribute, which never counts as a conflict.

Negation and the past are kept as ``negated``: "I no longer work at Acme", "I used to live in
Paris", "I'm not vegan anymore" deny a value; :mod:`memoryd.knowledge.conflict` lets a denial
supersede the statement of the same value (or, for "I quit my job", any value of that key).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memoryd.knowledge import relationships
from memoryd.knowledge.attribute_rules import NAME, Found, predicate_facts
from memoryd.knowledge.attribute_subjects import (
    CARERS,
    HAS_PET,
    IMPLICIT,
    NAME_IS_REL,
    NOMINATIVE,
    POSSESSIVE,
    PRONOUN,
    REL_IS_NAME,
    SELF,
    SWITCHED_REL,
    Subject,
    relation_subject,
    subject_of,
)
from memoryd.knowledge.attribute_transitions import couple_facts, frame_facts, speaker_facts, transition_facts
from memoryd.knowledge.attribute_values import normalise_key, normalise_value
from memoryd.knowledge.attribute_words import DEMONYMS, JOBS, MULTI_VALUED
from memoryd.knowledge.clauses import FILLER, NOW, clauses, expanded, straightened
from memoryd.knowledge.open_attributes import CHANGED_PREFIX, VERB_OBJECT, OpenFact, open_facts
from memoryd.knowledge.paraphrases import rewritten
from memoryd.knowledge.possessive_rules import possessive_facts
from memoryd.knowledge.trailing import TRAILING as _TRAILING
from memoryd.lazy import LazyPattern

__all__ = [
    "IMPLICIT",
    "PRONOUN",
    "SELF",
    "Attribute",
    "Subject",
    "attribute_keys",
    "normalise_value",
    "parse_attributes",
    "parse_open_attributes",
]


@dataclass(frozen=True)
class Attribute:
    key: str  # "employer", "favorite:color", "opinion:cats", "allergy", ...
    value: str  # normalised: "acme", "blue"; "" for a denial of any value ("I quit my job")
    subject: Subject
    multi_valued: bool = False
    negated: bool = False
    #: The statement says the value changed ("now", "these days"): an open verb-object
    #: attribute (``open_attributes``) replaces an older one only then.
    changed: bool = False
    #: Follows from the statement rather than being said ("I'm divorced": no partner now).
    implied: bool = False


_INVERTED_FAVORITE = LazyPattern(
    r"^(?P<value>.+?)\s+(?:is|are|became|(?:has|have)\s+become)\s+(?P<rest>\S+(?:\s+\S+)?\s+(?:new\s+)?"
    r"favou?rite\s+.+)$",
    re.IGNORECASE,
)
_ONE_OF = LazyPattern(r"^one\s+of\s+", re.IGNORECASE)
#: A note that leaves out whose favourite it is ("Favorite color is blue"): the owner's, as
#: "Works at Acme" is, unless the memory names its subjects.
_OWNERLESS_FAVORITE = LazyPattern(r"^favou?rite\s", re.IGNORECASE)
#: A note's key and value: "New mobile number: 555-0142", "Email: sam@example.com".
_NOTE = LazyPattern(r"^(?P<key>[a-z][a-z -]{1,40}?)\s*:\s+(?P<value>\S.*)$", re.IGNORECASE)
_CALL_ME = LazyPattern(rf"^(?:please\s+)?call\s+me\s+(?P<value>{NAME})(?:\s+from\s+now\s+on)?$", re.IGNORECASE)

_LEADING_ADVERBS = LazyPattern(
    r"^(?:(?:now|currently|still|recently|just|actually|finally|officially|"
    r"happily|also|presently|meanwhile)\s+)+",
    re.IGNORECASE,
)
_BE_ADVERBS = LazyPattern(
    r"^(am|is|are)\s+(?:(?:now|currently|still|also|actually|officially|finally)\s+)+", re.IGNORECASE
)
_PERFECT = LazyPattern(r"^(?:have|has)\s+(?=(?:been|gone|become|got|grown|begun|started|\w+ed)\b)", re.IGNORECASE)
#: "lived in Aberdeen", "worked at Acme" (not "have lived in"): a past home or job, as "used to"
#: says it; it is told before the perfect is taken off.
_SIMPLE_PAST = LazyPattern(r"^(lived|worked)\s+(?=(?:in|at|for|on)\b)", re.IGNORECASE)
_ADDITIVE = LazyPattern(r"\b(?:also|too|as\s+well|another|second|additionally)\b", re.IGNORECASE)
_NEGATIONS = (
    (LazyPattern(r"^(am|is|are)\s+(?:no\s+longer|not|never)\s+", re.I), r"\1 "),
    (LazyPattern(r"^(?:no\s+longer|never|do\s+not|does\s+not|did\s+not|used\s+to)\s+", re.I), ""),
    (LazyPattern(r"^(?:stopped|quit)\s+(?=being\b|working\b|living\b|speaking\b|eating\b)", re.I), ""),
    (LazyPattern(r"^(?:was|were)\s+(?!born\b|laid\b|fired\b|let\b|promoted\b)", re.I), "is "),
)


def parse_attributes(text: str) -> list[Attribute]:
    """The attributes ``text`` sets, in order; empty when no rule recognises it."""
    return list(_parse_cached(text))


def attribute_keys(text: str) -> tuple[str, ...]:
    """The keys of the attributes ``text`` sets, sorted, once each: what a memory is filed
    under for supersession (``memory_attributes``)."""
    named = {attribute.key for attribute in _parse_cached(text)}
    opened = _parse_open_cached(text)
    if named and not (opened and all(a.key.startswith(VERB_OBJECT) for a in opened)):
        return tuple(sorted(named))
    # a verb and its object are compared even when a named rule read one side ("works at the
    # bakery" is an employer, "work at the florist now" no named fact): see ``conflict``
    keys = named | {attribute.key for attribute in opened}
    # A verb-object statement that says it changed is also filed as "did+:...": only such a
    # memory looks up the older holders of its "did:" key (see ``supersession.CHANGED_PREFIX``);
    # "Sam met Ana" after a thousand "Sam met ..." judges none of them.
    keys |= {CHANGED_PREFIX + a.key[len(VERB_OBJECT) :] for a in _parse_open_cached(text) if a.changed}
    return tuple(sorted(keys))


@functools.lru_cache(maxsize=4096)  # a new memory is compared with several candidates, each parsed again
def _parse_cached(text: str) -> tuple[Attribute, ...]:
    cleaned = straightened(text)
    # Typed all in lower case ("i live in berlin"), places and names lose their capitals.
    # islower() first: it answers most texts in C (True means no upper-case character).
    # Read before the contractions are expanded: "i'm" becomes "I am".
    lowercase_text = cleaned.islower() or not any(map(str.isupper, cleaned))
    cleaned = _prepared(text)
    found: list[Attribute] = []
    for clause in clauses(cleaned):
        says_now = NOW.search(clause) is not None
        clause = FILLER.sub("", clause.strip().rstrip(".!?… ")).strip()
        if clause:
            referred = (_named_referent(a, cleaned) for a in _clause_attributes(clause, lowercase_text, says_now))
            found.extend(a for a in referred if a is not None)
    return tuple(found)


#: "she's my favourite writer": the favourite is whoever the text named before.
_PRONOUNS = frozenset("he she they it him her them".split())
_PROPER_NAME = LazyPattern(r"(?-i:[A-Z][\w'-]*\.?(?:\s+[A-Z][\w'-]*\.?){0,3})")


def _named_referent(attribute: Attribute, text: str) -> Attribute | None:
    """A favourite whose value is a pronoun, with the last name the text gave before it (or
    nothing when it gave none: "she" is no favourite)."""
    if attribute.value not in _PRONOUNS or not attribute.key.startswith("favorite:"):
        return attribute
    said = re.search(rf"\b{attribute.value}\b", text, re.IGNORECASE)
    before = text[: said.start()] if said else ""
    # not a sentence's first word ("These days ...") nor "I"
    names = [
        m.group()
        for m in _PROPER_NAME.finditer(before)
        if m.group() != "I" and before[: m.start()].strip()[-1:] not in ("", ".", "!", "?")
    ]
    if not names:
        return None
    value = normalise_value(names[-1])
    return Attribute(
        attribute.key, value, attribute.subject, attribute.multi_valued, attribute.negated, attribute.changed
    )


@functools.lru_cache(maxsize=1024)  # both parsers read it: the named rules, then the open ones
def _prepared(text: str) -> str:
    """``text`` straightened, its contractions written out, its paraphrases of change rewritten."""
    return rewritten(expanded(straightened(text)))


def parse_open_attributes(text: str) -> list[Attribute]:
    """The open-vocabulary attributes of ``text`` (``open_attributes``): what supersession
    compares when no named rule recognises either statement."""
    return list(_parse_open_cached(text))


@functools.lru_cache(maxsize=4096)
def _parse_open_cached(text: str) -> tuple[Attribute, ...]:
    return tuple(_open_attribute(fact) for fact in open_facts(_prepared(text)))


def _open_attribute(fact: OpenFact) -> Attribute:
    subject = (
        Subject("I", SELF) if not fact.owner else Subject(fact.owner, "name:" + " ".join(fact.owner.casefold().split()))
    )
    return Attribute(fact.key, fact.value, subject, changed=fact.changed)


def _clause_attributes(clause: str, lowercase_text: bool, says_now: bool = False) -> list[Attribute]:
    if m := HAS_PET.search(clause):
        return _names_of(relation_subject("my", m["rel"], None), m["names"])
    if m := SWITCHED_REL.match(clause):  # "we switched dentists to Dr. Khan"
        return _names_of(relation_subject("my", m["rel"], None), m["names"])
    if m := NAME_IS_REL.match(clause):
        return _names_of(relation_subject("my", m["rel"], None), m["names"])
    if m := _CALL_ME.match(clause):
        return [_attribute(Found("nickname", m["value"]), Subject("I", SELF))]  # what to call me, as "I go by"
    if (couple := couple_facts(clause)) is not None:  # "Marco and I got married"
        return [_attribute(f, Subject("I", SELF)) for f in couple]
    if said := speaker_facts(_TRAILING.sub("", clause)):  # "text me on ...", "Berlin is home"
        return [_attribute(f, Subject("I", SELF)) for f in said]
    if (m := _INVERTED_FAVORITE.match(clause)) and not _ONE_OF.match(clause):
        clause = f"{m['rest']} is {m['value']}"  # "Blue is my favorite color" -> "my favorite color is Blue"
    one_of = bool(_ONE_OF.match(clause))
    clause = _ONE_OF.sub("", clause)
    if (m := POSSESSIVE.match(clause)) and (subject := subject_of(m)):
        facts = possessive_facts(clause[m.end() :])
        if one_of:  # "one of my favorite foods is sushi": one of several
            facts = [Found("favorites:" + f.key.partition(":")[2], f.value, True) for f in facts]
        if facts:
            return [_attribute(f, subject) for f in facts]
    if (note := _NOTE.match(clause)) and (facts := possessive_facts(f"{note['key']} is {note['value']}")):
        return [_attribute(f, Subject("", IMPLICIT)) for f in facts]  # a note: "Mobile number: 555-0142"
    if _OWNERLESS_FAVORITE.match(clause) and (facts := possessive_facts(clause)):
        return [_attribute(f, Subject("", IMPLICIT)) for f in facts]  # a note: "Favorite color is red"
    if (m := NOMINATIVE.match(clause)) and (subject := subject_of(m)):
        rest = clause[m.end() :]
    elif clause[:1].isalpha():
        subject, rest = Subject("", IMPLICIT), clause
    else:
        return []
    if subject.key.startswith("rel:"):  # "my boss is (now) Linda"
        names = REL_IS_NAME.match(_TRAILING.sub("", _BE_ADVERBS.sub(r"\1 ", rest)))
        if names and not _describes(names["names"]):
            return _names_of(subject, names["names"])
    additive = bool(_ADDITIVE.search(rest))
    rest, negated = _strip_modifiers(rest)
    attributes = []
    facts = (
        frame_facts(rest, lowercase_text)
        or predicate_facts(rest, lowercase_text)
        or transition_facts(rest, lowercase_text)
    )
    for fact in facts:
        if fact.key.startswith("opinion:") and negated:  # "I don't like X" is an opinion too
            fact = Found(fact.key, "negative" if fact.value == "positive" else "positive")
        elif negated:
            fact = Found(fact.key, fact.value, fact.multi_valued, negated=True, implied=fact.implied)
        elif says_now and not fact.changed:  # "my sister now lives in Seattle": a change
            fact = Found(fact.key, fact.value, fact.multi_valued, implied=fact.implied, changed=True)
        attribute = _attribute(fact, subject)
        if additive:  # "I also work at a bar": a second value, not a replacement
            attribute = Attribute(
                attribute.key, attribute.value, subject, True, attribute.negated, implied=attribute.implied
            )
        attributes.append(attribute)
    return attributes


def _strip_modifiers(rest: str) -> tuple[str, bool]:
    """("no longer works at Acme anymore") -> ("works at Acme", True)."""
    rest = _LEADING_ADVERBS.sub("", rest.strip())
    past = _SIMPLE_PAST.match(rest)
    if past:
        rest = ("live " if past[1].lower() == "lived" else "work ") + rest[past.end() :]
    rest = _PERFECT.sub("", rest)  # "have been living in" -> "been living in"
    trailing = _TRAILING.search(rest)
    negated = bool(past) or bool(trailing and re.search(r"any\s*(?:more|longer)", trailing.group(), re.I))
    rest = rest[: trailing.start()] if trailing else rest  # the match is anchored at the end
    for pattern, replacement in _NEGATIONS:
        if pattern.match(rest):
            rest, negated = pattern.sub(replacement, rest, count=1), True
            break
    return _BE_ADVERBS.sub(r"\1 ", rest).strip(), negated


def _describes(names: str) -> bool:
    """ "my wife is Italian" / "my boss is Manager" describe; "my wife is Sarah" names."""
    last = names.split()[-1].casefold()
    return last in DEMONYMS or last in JOBS


def _names_of(subject: Subject, names: str) -> list[Attribute]:
    values = [n for n in re.split(r"\s*(?:,|\band\b)\s*", names) if n]
    several = len(values) > 1
    return [_attribute(Found("name", v, multi_valued=several), subject) for v in values]


def _attribute(found: Found, subject: Subject) -> Attribute:
    key = normalise_key(found.key)
    multi = found.multi_valued or key in MULTI_VALUED
    if key == "name" and subject.key.startswith("rel:"):
        canon = subject.key[4:]
        multi = multi or not (
            relationships.is_unique(canon) or canon in CARERS
        )  # "my dog's name is Rex": maybe two dogs
    return Attribute(key, normalise_value(found.value), subject, multi, found.negated, found.changed, found.implied)
