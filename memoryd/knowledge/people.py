"""People in the owner's life: relationship statements, name resolution, mentions in a query.

"My wife's name is Sarah", "Sarah is my wife", "my boss Tom ..." each yield a
:class:`RelationshipFact`; :func:`resolve_person` makes "my wife", "wife", "Sarah", "sarah" and
"Sarah's" land on one :class:`KnownPerson`.  Finding them in a query is
:mod:`memoryd.knowledge.mentions`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from memoryd.knowledge.attribute_rules import DEMONYMS, JOBS
from memoryd.knowledge.attributes import SELF
from memoryd.knowledge.relationships import PATTERN, canonical, is_unique, normalise_name, subject_class
from memoryd.lazy import LazyPattern

__all__ = [
    "KnownPerson",
    "PersonIndex",
    "RelationshipFact",
    "is_relationship_phrase",
    "merge_target",
    "normalise_name",
    "parse_relationships",
    "person_resolver",
    "resolve_person",
    "same_relationship",
    "unique_first_names",
]


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


_REL = rf"(?:(?:new|current)\s+)?(?P<rel>{PATTERN})\b"  # "my new boss" is my boss
#: A title before a name belongs to it ("my dentist is Dr. Okafor" names "Dr. Okafor", not "Dr").
_TITLES = ("Dr", "Mr", "Mrs", "Ms", "Mx", "Miss", "Prof", "Sir", "Dame", "Fr", "Rev")
_TITLE = rf"(?:(?:{'|'.join(_TITLES)})\.?\s+)"
_NAME = rf"(?P<name>(?-i:{_TITLE}?[A-Z][a-zà-ÿ-]+(?:\s+[A-Z][a-zà-ÿ-]+)?))"
_ANY_NAME = r"(?P<name>[A-Za-zà-ÿ][a-zà-ÿ-]+(?:\s+[A-Z][a-zà-ÿ-]+)?)"  # "...'s name is sarah"
_CAP = r"(?-i:[A-Z][a-zà-ÿ-]+)"
_NAMES = rf"(?P<names>{_CAP}(?:\s*,\s*{_CAP}){{0,8}},?\s+and\s+{_CAP})"
_NOT_NAMES = frozenset(
    """i the a an and or but so my our his her their he she they it we you and is was has had
    who which that this then also too yesterday today tomorrow last next monday tuesday wednesday
    thursday friday saturday sunday january february march april may june july august september
    october november december""".split()
)

_PATTERNS: tuple[tuple[LazyPattern, str | None], ...] = tuple(
    (LazyPattern(pattern, re.IGNORECASE), fixed)
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
    if len(words) == 1 and words[0].rstrip(".") in _TITLES:
        return None  # "my dentist is Dr. Okafor on ...": a title alone names nobody
    if len(words) == 1 and (words[0].casefold() in DEMONYMS or words[0].casefold() in JOBS):
        return None  # "my wife is Italian" (but "Tom Baker" is a name)
    return " ".join(w[:1].upper() + w[1:] for w in words)


def _singular(surface: str) -> bool:
    """ "mom" yes (an alias), "kids" / "children" no: a plural names a group, not this person."""
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
            listed = groups.get("names")
            raw_names = re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", listed) if listed else [m["name"]]
            surface = " ".join((groups.get("rel") or "").casefold().split())
            relationship = fixed or canonical(surface)
            for name in filter(None, map(_clean_name, raw_names)):
                if relationship and normalise_name(name) not in facts:
                    aliases = [f"my {relationship}"] + ([f"my {surface}"] if _singular(surface) else [])
                    facts[normalise_name(name)] = RelationshipFact(name, relationship, tuple(dict.fromkeys(aliases)))
    return list(facts.values())


# -- resolution -------------------------------------------------------------------------------

_REL_PHRASE = LazyPattern(rf"^(?:(?:my|our|the)\s+)?{_REL}$", re.IGNORECASE)


def same_relationship(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and subject_class(a) == subject_class(b)


def unique_first_names(people: Sequence[KnownPerson]) -> dict[str, KnownPerson]:
    """First names that point at exactly one known person ("Sarah" for "Sarah Connor")."""
    counts: dict[str, list[KnownPerson]] = {}
    for person in people:
        counts.setdefault(normalise_name(person.name).split(" ")[0], []).append(person)
    return {first: found[0] for first, found in counts.items() if len(found) == 1}


def is_relationship_phrase(phrase: str) -> bool:
    """ "my wife", "wife", "the boss": an alias that names a role, not a name."""
    return _REL_PHRASE.match(" ".join(phrase.split())) is not None


def resolve_person(phrase: str, people: Sequence[KnownPerson]) -> KnownPerson | None:
    """The one person ``phrase`` names ("my wife", "wife", "Sarah", "sarah", "Sarah's")."""
    wanted = normalise_name(phrase)
    for person in people:
        if wanted == normalise_name(person.name) or wanted in {normalise_name(a) for a in person.aliases}:
            return person
    if m := _REL_PHRASE.match(wanted):
        relationship = canonical(m["rel"])
        matches = [p for p in people if same_relationship(p.relationship, relationship)]
        return matches[0] if len(matches) == 1 else None  # two sons: which one is unknown
    return unique_first_names(people).get(wanted)


def person_resolver(people: Sequence[KnownPerson], owner_names: Sequence[str] = ()) -> Callable[[str], str | None]:
    """A resolver for :func:`memoryd.knowledge.conflict.decide`: phrase -> person key, and the
    owner's own names (username, display name) -> ``attributes.SELF``, so "I ..." said by the
    owner in a chat and "I ..." added by hand are one subject."""
    own = {normalise_name(name) for name in owner_names}
    index = PersonIndex(people)  # one pass here, then each phrase is a look-up

    def resolve(phrase: str) -> str | None:
        if normalise_name(phrase) in own:
            return SELF
        person = index.resolve(phrase)
        return person.key if person else None

    return resolve


def merge_target(fact: RelationshipFact, people: Sequence[KnownPerson]) -> KnownPerson | None:
    """The known person a new fact is about: same name, else the holder of a one-at-a-time
    relationship ("my wife's name is Sara" after Sarah is known as my wife merges, no duplicate)."""
    by_name = resolve_person(fact.name, people)
    if by_name is not None:
        return by_name
    if is_unique(fact.relationship):
        holders = [p for p in people if same_relationship(p.relationship, fact.relationship)]
        return holders[0] if len(holders) == 1 else None
    return None


class PersonIndex:
    """An owner's people indexed for :meth:`resolve` and :meth:`merge_target`: the answers of
    :func:`resolve_person` and :func:`merge_target` in dictionary look-ups, so resolving a
    memory's subjects costs the same with 5 or 5,000 known people.  Built once (a pass over
    the people), then kept up to date with :meth:`add`.  ``exclude`` (person keys) answers as
    if those people were not in the list: a caller that may not know of the person picked
    asks again without it."""

    def __init__(self, people: Sequence[KnownPerson] = ()) -> None:
        #: normalised name or alias -> key -> (position, person): the earliest person not
        #: excluded wins, as in the list :func:`resolve_person` walks.
        self._names: dict[str, dict[str, tuple[int, KnownPerson]]] = {}
        self._holders: dict[str, dict[str, KnownPerson]] = {}  # relationship class -> key -> person
        self._first_names: dict[str, dict[str, KnownPerson]] = {}
        self._position: dict[str, int] = {}
        for person in people:
            self.add(person)

    def __len__(self) -> int:
        return len(self._position)

    def add(self, person: KnownPerson) -> None:
        """Index a new person, or what an existing one (same key) gained: aliases, a relationship."""
        position = self._position.setdefault(person.key, len(self._position))
        for name in (person.name, *person.aliases):
            self._names.setdefault(normalise_name(name), {})[person.key] = (position, person)
        if person.relationship:
            self._holders.setdefault(subject_class(person.relationship), {})[person.key] = person
        first = normalise_name(person.name).split(" ")[0]
        self._first_names.setdefault(first, {})[person.key] = person

    def resolve(self, phrase: str, exclude: Collection[str] = ()) -> KnownPerson | None:
        """:func:`resolve_person`'s answer."""
        wanted = normalise_name(phrase)
        held = [entry for key, entry in self._names.get(wanted, {}).items() if key not in exclude]
        if held:
            return min(held, key=lambda entry: entry[0])[1]
        if m := _REL_PHRASE.match(wanted):
            relationship = canonical(m["rel"])
            return self._only_holder(relationship, exclude)
        return _only(self._first_names.get(wanted, {}), exclude)

    def merge_target(self, fact: RelationshipFact, exclude: Collection[str] = ()) -> KnownPerson | None:
        """:func:`merge_target`'s answer."""
        by_name = self.resolve(fact.name, exclude)
        if by_name is not None:
            return by_name
        return self._only_holder(fact.relationship, exclude) if is_unique(fact.relationship) else None

    def _only_holder(self, relationship: str | None, exclude: Collection[str]) -> KnownPerson | None:
        if relationship is None:
            return None
        return _only(self._holders.get(subject_class(relationship), {}), exclude)


def _only(people: dict[str, KnownPerson], exclude: Collection[str]) -> KnownPerson | None:
    """The one person of ``people`` not excluded, or None (nobody, or several)."""
    if not exclude:
        return next(iter(people.values())) if len(people) == 1 else None
    left = [person for key, person in people.items() if key not in exclude]
    return left[0] if len(left) == 1 else None


#: How many hidden people a match may pick before the phrase counts as naming nobody (a
#: caller is matched only against the people it may know of).
MAX_HIDDEN_PICKS = 4

#: Subjects that name the owner, never a person in their life.
SELF_WORDS = frozenset({"i", "me", "myself", "user", "the user", "self", "owner"})


def new_subjects(resolve: Callable[[str], KnownPerson | None], own: set[str], subjects: Sequence[str]) -> list[int]:
    """Positions of the subjects that would each create a person (a name ``resolve``, e.g.
    :meth:`PersonIndex.resolve`, finds nobody for)."""
    positions: list[int] = []
    seen: set[str] = set()
    for position, subject in enumerate(subjects):
        wanted = normalise_name(subject)
        if not wanted or wanted in own or wanted in seen or is_relationship_phrase(subject):
            continue
        if resolve(subject) is None:
            seen.add(wanted)
            positions.append(position)
    return positions
