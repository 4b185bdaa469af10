"""Known people mentioned in a text ("what does my wife like?", "does Sarah like sushi?").

Built once per owner's people list (:class:`MentionFinder`), then each text is one pass over its
words with dictionary look-ups: no regex per person, so a query costs the same with 5 or 500
known people.  Names are only ever matched against people already known: a capitalised word
alone ("Sarah Connor movie") is never taken for a person.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memoryd.knowledge.people import KnownPerson, is_relationship_phrase, normalise_name, unique_first_names
from memoryd.knowledge.relationships import FIRST_WORDS, PETS, canonical, subject_class
from memoryd.lazy import LazyPattern

Via = Literal["name", "alias", "relationship"]


@dataclass(frozen=True)
class Mention:
    person: KnownPerson | None  # None: "my wife" mentioned but no wife is known yet
    text: str  # the words of the text that mention them
    via: Via
    relationship: str | None = None
    start: int = 0


_WORD = LazyPattern(r"[^\W\d_][\w'’-]*")
#: Before a relationship word: whose it is.  "a doctor" or "her husband" is not the owner's.
_OWNERS = frozenset({"my", "our", "the"})
_OTHERS = frozenset({"a", "an", "his", "her", "their", "your", "its", "some", "any"})
_LONGEST_RELATIONSHIP = 3  # "mother in law"


def _bare(word: str) -> str:
    """ "Sarah's" / "kids'" -> "sarah" / "kids"."""
    return re.sub(r"['’]s?$", "", word.casefold())


class MentionFinder:
    """The people of one owner, indexed for :meth:`find`."""

    def __init__(self, people: Sequence[KnownPerson]) -> None:
        #: name words -> (person, via, matched by a first name only)
        self._names: dict[tuple[str, ...], tuple[KnownPerson, Via, bool]] = {}
        for person in people:
            for alias in person.aliases:
                if not is_relationship_phrase(alias):
                    self._names.setdefault(tuple(normalise_name(alias).split()), (person, "alias", False))
        for first, person in unique_first_names(people).items():
            self._names.setdefault((first,), (person, "name", True))
        for person in people:  # full names last: they win over aliases and first names
            self._names[tuple(normalise_name(person.name).split())] = (person, "name", False)
        self._longest_name = max((len(k) for k in self._names), default=0)
        self._first_name_words = set(k[0] for k in self._names)
        self._first_names = Counter(normalise_name(person.name).split(" ")[0] for person in people)
        self._holders: dict[str, list[KnownPerson]] = {}  # relationship class -> people
        for person in people:
            if person.relationship:
                self._holders.setdefault(subject_class(person.relationship), []).append(person)

    def add(self, person: KnownPerson) -> None:
        """Index a person created (or given aliases or a relationship) since this finder was
        built, without a pass over everyone: the writer keeps one finder per owner between adds."""
        keys = [tuple(normalise_name(alias).split()) for alias in person.aliases if not is_relationship_phrase(alias)]
        for key in keys:
            self._names.setdefault(key, (person, "alias", False))
        name = tuple(normalise_name(person.name).split())
        first = name[0] if name else ""
        held_name = self._names.get(name)
        if name and (held_name is None or held_name[0].key != person.key):
            self._first_names[first] += 1
            held = self._names.get((first,))
            if self._first_names[first] == 1:
                self._names.setdefault((first,), (person, "name", True))
            elif held is not None and held[2]:
                del self._names[(first,)]  # two people share the first name: it names neither
            self._names[name] = (person, "name", False)
            keys.append(name)
        for key in keys:
            if key:
                self._longest_name = max(self._longest_name, len(key))
                self._first_name_words.add(key[0])
        if person.relationship:
            holders = self._holders.setdefault(subject_class(person.relationship), [])
            holders[:] = [p for p in holders if p.key != person.key] + [person]

    def find(self, text: str) -> list[Mention]:
        """Known people and relationship phrases in ``text``, in order, one mention per person
        (a relationship held by several known people mentions each)."""
        words = list(_WORD.finditer(text))
        seen: set[str] = set()
        unique: list[Mention] = []
        i = 0
        while i < len(words):
            first = _bare(words[i].group())
            hit = None
            if first in self._first_name_words or words[i].group().casefold() in self._first_name_words:
                hit = self._name_at(text, words, i)
            if hit is None and first.split("-")[0] in FIRST_WORDS:
                hit = self._relationship_at(text, words, i, seen)
            found, used = hit or ([], 1)
            for mention in found:
                ident = mention.person.key if mention.person else "rel:" + (mention.relationship or "")
                if ident not in seen:
                    seen.add(ident)
                    unique.append(mention)
            i += used
        return unique

    def _name_at(self, text: str, words: list[re.Match[str]], i: int) -> tuple[list[Mention], int] | None:
        for length in range(min(self._longest_name, len(words) - i), 0, -1):
            key = tuple(
                _bare(w.group()) if n == length - 1 else w.group().casefold()
                for n, w in enumerate(words[i : i + length])
            )
            if (hit := self._names.get(key)) is None:
                continue
            person, via, first_name_only = hit
            end = words[i + length - 1].end()
            if first_name_only and _followed_by_surname(text, words, i + length):
                return None  # "Sarah Connor movie" when we know Sarah Miller: another Sarah
            return [Mention(person, text[words[i].start() : end], via, person.relationship, words[i].start())], length
        return None

    def _relationship_at(
        self, text: str, words: list[re.Match[str]], i: int, seen: set[str]
    ) -> tuple[list[Mention], int] | None:
        for length in range(min(_LONGEST_RELATIONSHIP, len(words) - i), 0, -1):
            phrase = " ".join(w.group().casefold() for w in words[i : i + length - 1])
            phrase = (phrase + " " + _bare(words[i + length - 1].group())).strip()
            if (relationship := canonical(phrase)) is None:
                continue
            owner, owner_at = _owner_word(words, i)
            if owner in _OTHERS:
                return None
            holders = self._holders.get(subject_class(relationship), [])
            if owner is None and (not holders or relationship in PETS):
                return None  # a bare common noun ("dog", "friend") names someone only when known
            start = words[owner_at].start() if owner in _OWNERS else words[i].start()
            said = text[start : words[i + length - 1].end()]
            new: list[KnownPerson | None] = [p for p in holders if p.key not in seen]  # build each once
            if holders and not new:
                return [], length
            return [Mention(p, said, "relationship", relationship, words[i].start()) for p in new or [None]], length
        return None


def _owner_word(words: list[re.Match[str]], i: int) -> tuple[str | None, int]:
    """The determiner before a relationship word and its index, skipping "new"/"current"
    ("my new boss")."""
    j = i - 1
    if j >= 0 and words[j].group().casefold() in {"new", "current"}:
        j -= 1
    word = words[j].group().casefold() if j >= 0 else ""
    return (word, j) if word in _OWNERS or word in _OTHERS else (None, i)


def _followed_by_surname(text: str, words: list[re.Match[str]], j: int) -> bool:
    if j >= len(words):
        return False
    gap = text[words[j - 1].end() : words[j].start()]
    return gap.isspace() and words[j].group()[:1].isupper()


def find_mentions(text: str, people: Sequence[KnownPerson]) -> list[Mention]:
    """One-off :meth:`MentionFinder.find`; build a finder once to look up many texts."""
    return MentionFinder(people).find(text)
