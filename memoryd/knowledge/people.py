"""People in the owner's life: relationship statements, name resolution, mentions in a query.

"My wife's name is Sarah", "Sarah is my wife", "my boss Tom ..." each yield a
:class:`RelationshipFact`; :func:`resolve_person` makes "my wife", "wife", "Sarah", "sarah" and
"Sarah's" land on one :class:`KnownPerson`; :func:`find_mentions` finds known people in a query
("what does my wife like?") for a people retriever.  Names are only ever matched against people
already known: a capitalised word alone ("Sarah Connor movie") is never taken for a person.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from memoryd.knowledge.attribute_rules import DEMONYMS, JOBS
from memoryd.knowledge.relationships import PATTERN, PETS, canonical, is_unique, normalise_name, subject_class

__all__ = ["KnownPerson", "Mention", "RelationshipFact", "find_mentions", "merge_target",
           "normalise_name", "parse_relationships", "person_resolver", "resolve_person"]


@dataclass(frozen=True)
class RelationshipFact:
    name: str  # "Sarah"
    relationship: str  # canonical: "wife", "boss", "dog", "spouse" (from "married to")
    aliases: tuple[str, ...]  # ("my wife",)


@dataclass(frozen=True)
class KnownPerson:
    key: str  # the store's id for the person
    name: str
    aliases: tuple[str, ...] = ()
    relationship: str | None = None


@dataclass(frozen=True)
class Mention:
    person: KnownPerson | None  # None: "my wife" mentioned but no wife is known yet
    text: str  # the words of the query that mention them
    via: Literal["name", "alias", "relationship"]
    relationship: str | None = None
    start: int = 0


_REL = rf"(?:(?:new|current)\s+)?(?P<rel>{PATTERN})\b"  # "my new boss" is my boss
_NAME = r"(?P<name>(?-i:[A-Z][a-zà-ÿ-]+(?:\s+[A-Z][a-zà-ÿ-]+)?))"
_ANY_NAME = r"(?P<name>[A-Za-zà-ÿ][a-zà-ÿ-]+(?:\s+[A-Z][a-zà-ÿ-]+)?)"  # "...'s name is sarah"
_CAP = r"(?-i:[A-Z][a-zà-ÿ-]+)"
_NAMES = rf"(?P<names>{_CAP}(?:\s*,\s*{_CAP})*,?\s+and\s+{_CAP})"
_NOT_NAMES = frozenset(
    """i the a an and or but so my our his her their he she they it we you and is was has had
    who which that this then also too yesterday today tomorrow last next monday tuesday wednesday
    thursday friday saturday sunday january february march april may june july august september
    october november december""".split()
)

_PATTERNS: tuple[tuple[re.Pattern[str], str | None], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), fixed)
    for pattern, fixed in (
        (rf"\b(?:my|our)\s+{_REL}(?:'s|')\s+(?:first\s+|full\s+)?name\s+is\s+{_ANY_NAME}", None),
        (rf"\b(?:my|our)\s+{_REL}\s+is\s+(?:named|called)\s+{_ANY_NAME}", None),
        (rf"\b{_NAME}\s+(?:is|was)\s+(?:my|our)\s+(?:new\s+)?{_REL}(?!\s*'s)", None),
        (rf"\b{_NAME},\s+(?:my|our)\s+{_REL}(?!\s*'s)", None),
        (rf"\b(?:i|we)\s+(?:have|got|adopted)\s+an?\s+(?:new\s+)?{_REL}\s+(?:named|called)\s+{_NAME}", None),
        (rf"\b(?:my|our)\s+{_REL}\s+is\s+{_NAME}\s*(?:[.,;!?]|$|\s+(?:and|who|but)\b)", None),
        (rf"\b(?:my|our)\s+{_REL}(?:,\s+|\s+){_NAME}\b", None),
        (rf"\b(?:i\s+am|i'm|we\s+are|we're|i\s+got|i\s+just\s+got)\s+married\s+to\s+{_NAME}", "spouse"),
        (rf"\b(?:i\s+am|i'm|we\s+are|we're|i\s+got|i\s+just\s+got)\s+engaged\s+to\s+{_NAME}", "fiance"),
        (rf"\b(?:i\s+am|i'm)\s+dating\s+{_NAME}", "partner"),
        (rf"\b(?:my|our)\s+{_REL}(?:'s|')?\s+(?:names\s+)?are\s+{_NAMES}", None),
        (rf"\b{_NAMES}\s+are\s+(?:my|our)\s+{_REL}", None),
    )
)


def _clean_name(raw: str) -> str | None:
    words = raw.split()
    while words and words[-1].casefold() in _NOT_NAMES:  # "my boss Tom And ..." never happens
        words.pop()
    if not words or words[0].casefold() in _NOT_NAMES:
        return None
    if len(words) == 1 and (words[0].casefold() in DEMONYMS or words[0].casefold() in JOBS):
        return None  # "my wife is Italian" (but "Tom Baker" is a name)
    return " ".join(w[:1].upper() + w[1:] for w in words)


def _singular(surface: str) -> bool:
    """"mom" yes (an alias), "kids" / "children" no: a plural names a group, not this person."""
    if not surface or surface in {"children", "wives", "puppies", "grandchildren", "grandkids"}:
        return False
    return not (surface.endswith("s") and canonical(surface[:-1]) == canonical(surface))


def parse_relationships(text: str) -> list[RelationshipFact]:
    """The named relationships ``text`` states; a relationship without a name yields nothing."""
    text = " ".join(text.replace("’", "'").split())
    facts: dict[str, RelationshipFact] = {}
    for pattern, fixed in _PATTERNS:
        for m in pattern.finditer(text):
            groups = m.groupdict()
            raw_names = re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", groups["names"]) if groups.get("names") else [m["name"]]
            surface = " ".join((groups.get("rel") or "").casefold().split())
            relationship = fixed or canonical(surface)
            for name in filter(None, map(_clean_name, raw_names)):
                if relationship and normalise_name(name) not in facts:
                    aliases = [f"my {relationship}"] + ([f"my {surface}"] if _singular(surface) else [])
                    facts[normalise_name(name)] = RelationshipFact(name, relationship, tuple(dict.fromkeys(aliases)))
    return list(facts.values())


# -- resolution -------------------------------------------------------------------------------

_REL_PHRASE = re.compile(rf"^(?:(?:my|our|the)\s+)?{_REL}$", re.IGNORECASE)


def _same_relationship(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and subject_class(a) == subject_class(b)


def _first_names(people: Sequence[KnownPerson]) -> dict[str, KnownPerson]:
    """First names that point at exactly one known person ("Sarah" for "Sarah Connor")."""
    counts: dict[str, list[KnownPerson]] = {}
    for person in people:
        counts.setdefault(normalise_name(person.name).split(" ")[0], []).append(person)
    return {first: found[0] for first, found in counts.items() if len(found) == 1}


def resolve_person(phrase: str, people: Sequence[KnownPerson]) -> KnownPerson | None:
    """The one person ``phrase`` names ("my wife", "wife", "Sarah", "sarah", "Sarah's")."""
    wanted = normalise_name(phrase)
    for person in people:
        if wanted == normalise_name(person.name) or wanted in {normalise_name(a) for a in person.aliases}:
            return person
    if m := _REL_PHRASE.match(wanted):
        relationship = canonical(m["rel"])
        matches = [p for p in people if _same_relationship(p.relationship, relationship)]
        return matches[0] if len(matches) == 1 else None  # two sons: which one is unknown
    return _first_names(people).get(wanted)


def person_resolver(people: Sequence[KnownPerson]) -> Callable[[str], str | None]:
    """A resolver for :func:`memoryd.knowledge.conflict.decide`: phrase -> person key."""
    return lambda phrase: person.key if (person := resolve_person(phrase, people)) else None


def merge_target(fact: RelationshipFact, people: Sequence[KnownPerson]) -> KnownPerson | None:
    """The known person a new fact is about: same name, else the holder of a one-at-a-time
    relationship ("my wife's name is Sara" after Sarah is known as my wife merges, no duplicate)."""
    by_name = resolve_person(fact.name, people)
    if by_name is not None:
        return by_name
    if is_unique(fact.relationship):
        holders = [p for p in people if _same_relationship(p.relationship, fact.relationship)]
        return holders[0] if len(holders) == 1 else None
    return None


# -- mentions ---------------------------------------------------------------------------------

_REL_MENTION = re.compile(rf"\b(?P<det>my|our|the|a|an|his|her|their|your)?\s*\b{_REL}(?:'s|')?", re.IGNORECASE)


def _name_mentions(text: str, person: KnownPerson, first_names: dict[str, KnownPerson]) -> list[Mention]:
    found = []
    names = [(person.name, "name", False)] + [(a, "alias", False) for a in person.aliases if not _REL_PHRASE.match(a)]
    names += [(first, "name", True) for first, p in first_names.items()
              if p is person and first != normalise_name(person.name)]
    for name, via, first_name_only in names:
        pattern = r"\b" + r"\s+".join(map(re.escape, name.split())) + r"(?:'s|')?(?=\W|$)"
        for m in re.finditer(pattern, text, re.IGNORECASE):
            if first_name_only and re.match(r"\s+(?-i:[A-Z])[a-z]", text[m.end():]):
                continue  # "Sarah Connor movie" when we know Sarah Miller: another Sarah
            found.append(Mention(person, m.group(), via, person.relationship, m.start()))  # type: ignore[arg-type]
    return found


def find_mentions(text: str, people: Sequence[KnownPerson]) -> list[Mention]:
    """Known people (by name or alias) and relationship phrases mentioned in ``text``, in order,
    one mention per person; "my wife" with no known wife is a mention with ``person=None``."""
    text = text.replace("’", "'")
    first_names = _first_names(people)
    mentions = [m for person in people for m in _name_mentions(text, person, first_names)]
    for m in _REL_MENTION.finditer(text):
        det, relationship = (m["det"] or "").casefold(), canonical(m["rel"])
        if det in {"a", "an", "his", "her", "their", "your"} or relationship is None:
            continue  # "a doctor", "her husband": not the owner's
        holders = [p for p in people if _same_relationship(p.relationship, relationship)]
        if not det and (not holders or relationship in PETS):
            continue  # a bare common noun ("dog", "friend") names someone only when known
        for person in holders or [None]:  # "my kids" with two known: both
            mentions.append(Mention(person, m.group().strip(), "relationship", relationship, m.start("rel")))
    seen: set[str] = set()
    unique = []
    for mention in sorted(mentions, key=lambda m: m.start):
        ident = mention.person.key if mention.person else "rel:" + (mention.relationship or "")
        if ident not in seen:
            seen.add(ident)
            unique.append(mention)
    return unique
