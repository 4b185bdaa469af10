"""Whom a clause is about, read from its opening words: "I", "my wife", "Sarah's husband",
"my son Leo", "she".  :mod:`memoryd.knowledge.attributes` matches these shapes, then reads the
predicate after them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.knowledge import relationships
from memoryd.knowledge.attribute_rules import NAME
from memoryd.lazy import LazyPattern

SELF = "self"
PRONOUN = "pronoun"
#: A fragment without a subject ("Works at Acme", extraction style): the memory's one subject,
#: else whoever said it.
IMPLICIT = "implicit"


@dataclass(frozen=True)
class Subject:
    """Whom a statement is about: ``phrase`` as written, ``key`` for comparison."""

    phrase: str  # "I", "my wife", "Sarah", "Sarah's husband", "she"
    key: str  # "self", "rel:spouse", "name:sarah", "name:sarah/rel:spouse", "pronoun"
    #: "my brother" when one may have several: which one is unknown, so nothing supersedes.
    ambiguous: bool = False


_REL = r"(?:" + relationships.PATTERN + r")\b"
_OWNER = r"(?:my|our|the\s+user's|user's)"
_NEW = r"(?:(?:new|current)\s+)?"  # "my new boss" is my boss; "my ex-wife" is not my wife
_NOT_NAMES = frozenset(
    """i the my our he she they it this that we you your his her their user there here what
    when where who why how today yesterday tomorrow also and but so then now my btw oh ok well
    monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december just recently finally currently still
    really actually started moved lives works loves likes prefers got has is was had went new old
    always never usually often sometimes if because since after before maybe perhaps should would
    could will do does did can might must please let home best been eats switched changed became turned
    joined relocated""".split()
)

#: Relatives one has one of, called by the word alone as by a name ("Dad is living in Galway").
_CALLED_BY_RELATION = frozenset({"mother", "father", "grandmother", "grandfather"})

POSSESSIVE = LazyPattern(
    rf"^(?:(?P<own>{_OWNER})\s+{_NEW}(?P<rel>{_REL})(?:\s+(?P<relname>{NAME}))?(?:'s|')\s+"
    rf"|(?P<owner>{NAME})'s\s+(?P<orel>{_REL})(?:'s|')\s+"
    rf"|(?P<self>my|our|the\s+user's|user's)\s+"
    rf"|(?P<pron>his|her|their)\s+"
    rf"|(?P<name>{NAME})'s\s+)",
    re.IGNORECASE,
)
NOMINATIVE = LazyPattern(
    rf"^(?:(?P<own>{_OWNER})\s+{_NEW}(?P<rel>{_REL})(?:,?\s+(?P<relname>{NAME}),?)?"
    rf"|(?P<self>i|we|the\s+user|user)\b(?!')"
    rf"|(?P<owner>{NAME})'s\s+(?P<orel>{_REL})"
    rf"|(?P<pron>he|she|they)\b"
    rf"|(?P<name>{NAME})(?=\s))\s*",
    re.IGNORECASE,
)
NAME_IS_REL = LazyPattern(
    rf"^(?P<names>{NAME}(?:\s*(?:,|and)\s*{NAME}){{0,8}})\s+(?:is|are)\s+(?:now\s+)?(?:my|our)\s+{_NEW}"
    rf"(?P<rel>{_REL})(?:\s+now)?$",
    re.IGNORECASE,
)
REL_IS_NAME = LazyPattern(
    rf"^(?:is|are)\s+(?:named\s+|called\s+)?(?P<names>{NAME}(?:\s*(?:,|and)\s*{NAME}){{0,8}})$", re.IGNORECASE
)
#: "We switched dentists to Dr. Khan": a new holder of a role one has one of.
SWITCHED_REL = LazyPattern(
    rf"^(?:i|we)\s+(?:have\s+)?(?:switched|changed)\s+(?P<rel>{relationships.PATTERN})s?\s+to\s+(?P<names>{NAME})$",
    re.IGNORECASE,
)
HAS_PET = LazyPattern(
    rf"\b(?:i|we)\s+(?:have|got|adopted)\s+an?\s+(?:new\s+)?(?P<rel>{_REL})\s+"
    rf"(?:named|called)\s+(?P<names>{NAME})",
    re.IGNORECASE,
)


#: A capitalised "-ing" word followed by a preposition opens a fragment without a subject.
_VERB_FRAGMENT = LazyPattern(r"^[A-Z][a-z]+ing\s+(?:in|at|for|with|to|as|from|on)\b")


def subject_of(m: re.Match[str]) -> Subject | None:
    groups = m.groupdict()
    if groups.get("self"):
        return Subject("I", SELF)
    if groups.get("rel"):
        return relation_subject(groups["own"], groups["rel"], groups.get("relname"))
    if groups.get("orel"):
        owner = groups["owner"]
        if owner.casefold() in _NOT_NAMES:
            return None
        canon = relationships.canonical(groups["orel"]) or groups["orel"].casefold()
        key = f"name:{relationships.normalise_name(owner)}/rel:{relationships.subject_class(canon)}"
        return Subject(f"{owner}'s {canon}", key, not relationships.is_unique(canon))
    if groups.get("pron"):
        return Subject(groups["pron"].casefold(), PRONOUN)
    name = groups.get("name")
    if not name or name.split()[0].casefold() in _NOT_NAMES:
        return None
    if _VERB_FRAGMENT.match(m.string):  # "Living in Utrecht": a fragment led by its verb, not a name
        return None
    if relationships.canonical(name) in _CALLED_BY_RELATION:
        canon = relationships.canonical(name) or name.casefold()  # "Mom", "Dad": the speaker's, one person
        return Subject(f"my {canon}", "rel:" + relationships.subject_class(canon))
    return Subject(name, "name:" + relationships.normalise_name(name))


#: Who looks after one, one of each kind at a time: "my dentist" and "my therapist" are two
#: people (one word in ``relationships``), and a new dentist replaces the old one.
CARERS = frozenset({"doctor", "dentist", "therapist"})


def relation_subject(own: str, rel: str, name: str | None) -> Subject:
    canon = relationships.canonical(rel) or rel.casefold()
    unique = relationships.is_unique(canon)
    if (carer := " ".join(rel.casefold().split())) in CARERS:
        return Subject(f"{own.casefold()} {carer}", "rel:" + carer)
    if name and not unique and name.split()[0].casefold() not in _NOT_NAMES:
        return Subject(name, "name:" + relationships.normalise_name(name))  # "my son Leo" is Leo
    ambiguous = not unique and canon not in relationships.PETS
    return Subject(f"{own.casefold()} {canon}", "rel:" + relationships.subject_class(canon), ambiguous)
