"""Does a newer memory supersede an older one?  Offline rules, and an LLM that may do better.

The rules supersede only when both statements set the same single-valued attribute of the same
subject (:mod:`memoryd.knowledge.attributes`), never on similar wording alone: "I like cats" and
"I like dogs" set different attributes and coexist.  Three structural rules hold with or without
an LLM (a ``final`` decision, the model is not asked):

- different subjects coexist: a fact about Sarah never supersedes a general fact, nor the reverse;
- hearsay never supersedes what the subject said about themselves (the reverse does);
- multi-valued attributes (allergies, languages, a second job) coexist unless one denies the other.

``decide(old, new)`` expects ``new`` to be the later statement.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import msgspec

from memoryd.knowledge import relationships
from memoryd.knowledge.attribute_rules import ENDED
from memoryd.knowledge.attribute_values import same_kind
from memoryd.knowledge.attributes import IMPLICIT, PRONOUN, SELF, Attribute, parse_attributes, parse_open_attributes
from memoryd.knowledge.open_attributes import KEY_VALUE, VERB_OBJECT
from memoryd.lazy import LazyPattern

Verdict = Literal["conflict", "coexist", "unknown"]
#: Maps a subject phrase ("my wife", "Sarah", a speaker's username) to a person key, or None
#: when unknown.  It should map the owner's own names to ``attributes.SELF``.
Resolver = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Statement:
    content: str
    subjects: tuple[str, ...] = ()  # the memory's ``subjects`` field
    #: Who said it, when that is not the owner (a group member's name); None for the owner's
    #: own statements or when unknown.  "I ..." is about the speaker.
    speaker: str | None = None
    created_at: str | None = None  # ISO 8601; shown to the LLM


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    key: str | None = None  # the attribute both set, when the rules found one
    decided_by: Literal["rules", "llm"] = "rules"
    final: bool = False  # a structural rule: no LLM may overrule it

    @property
    def supersedes(self) -> bool:
        return self.verdict == "conflict"


_MY_RELATION = LazyPattern(rf"^(?:my|our)\s+(?P<rel>{relationships.PATTERN})$", re.IGNORECASE)


def _default_key(phrase: str) -> str:
    if m := _MY_RELATION.match(" ".join(phrase.split())):
        canon = relationships.canonical(m["rel"]) or m["rel"].casefold()
        return "rel:" + relationships.subject_class(canon)
    return "name:" + relationships.normalise_name(phrase)


class _Identities:
    """Subject identities of one statement, through the caller's resolver."""

    def __init__(self, statement: Statement, resolve: Resolver | None) -> None:
        self.statement = statement
        self._resolve = resolve or (lambda _phrase: None)

    def of_phrase(self, phrase: str) -> str:
        return self._resolve(phrase) or _default_key(phrase)

    def speaker(self) -> str:
        speaker = self.statement.speaker
        return self.of_phrase(speaker) if speaker else SELF

    def of(self, attribute: Attribute) -> str | None:
        subject, subjects = attribute.subject, self.statement.subjects
        if subject.key == SELF:
            return self.speaker()
        if subject.key == PRONOUN:  # "she works at IBM": whoever the one subject is
            return self.of_phrase(subjects[0]) if len(subjects) == 1 else None
        if subject.key == IMPLICIT:  # "Works at IBM": the one subject, else the speaker
            return self.of_phrase(subjects[0]) if len(subjects) == 1 else self.speaker()
        resolved = self._resolve(subject.phrase)
        if resolved is None and subject.key.startswith("rel:") and len(subjects) == 1:
            return self.of_phrase(subjects[0])  # "my wife's ..." with subjects ["Sarah"]
        return resolved or subject.key

    def people(self, attributes: Sequence[Attribute]) -> frozenset[str]:
        """Everyone the statement is about except the owner: its subjects field and its text."""
        named = {self.of_phrase(s) for s in self.statement.subjects}
        named |= {i for a in attributes if (i := self.of(a)) is not None}
        return frozenset(named - {SELF})

    def first_hand(self, attribute: Attribute) -> bool:
        """Said by its subject: "I ...", or a third-person sentence spoken by that person."""
        if attribute.subject.key == SELF or (attribute.subject.key == IMPLICIT and not self.statement.subjects):
            return True
        return self.statement.speaker is not None and self.speaker() == self.of(attribute)


#: Keys a transition of an unnamed relative replaces ("my sister moved to Seattle").
_TRANSITION_KEYS = frozenset({"residence", "job", "age"})


def _replaces(old: Attribute, new: Attribute) -> bool:
    if old.subject.ambiguous or new.subject.ambiguous:
        # "my sister": maybe two sisters, so only a change the newer one tells of replaces
        # ("my sister lives in Boston", then "my sister moved to Seattle"; "my son turned 8").
        return _transition(old, new)
    if old.multi_valued or new.multi_valued:  # only a denial of the same value replaces
        return bool(new.value) and old.value == new.value and old.negated != new.negated
    if not old.negated and not new.negated:
        if old.key == "relationship_status" and old.value in ENDED and new.value == "single":
            return False  # divorced, widowed, separated: single too
        # a note's value of another kind is about something else: "standup is at 9:30", "standup
        # is on Mondays"
        return not old.key.startswith(KEY_VALUE) or same_kind(old.value, new.value)
    if new.negated and not old.negated:  # "no longer at Acme"; "I quit my job" (value "")
        # "left Maersk" denies "Maersk in Copenhagen", "left the bakery" "the bakery on Mill St"
        # (where it is), not "Copenhagen Airport" after "left Copenhagen"
        return new.value in ("", old.value) or (new.key == "employer" and _located(old.value, new.value))
    return not new.negated and old.value == new.value  # "at Acme again" after "no longer at Acme"


def _located(value: str, place: str) -> bool:
    """``value`` is ``place`` and where it is: "maersk in copenhagen", "bakery on mill st"."""
    rest = value.removeprefix(place + " ") if value.startswith(place + " ") else ""
    return rest.split(" ", 1)[0] in ("in", "on", "at", "near", "by")


def _transition(old: Attribute, new: Attribute) -> bool:
    if not new.changed or old.changed or old.negated or new.negated or new.key not in _TRANSITION_KEYS:
        return False
    if new.key == "age":  # one only grows older
        return old.value.isdigit() and new.value.isdigit() and int(new.value) > int(old.value)
    return old.value != new.value


def _verbs_only(old: Sequence[Attribute], new: Sequence[Attribute]) -> bool:
    """Both read as verb and object ("works at the bakery", "work at the florist now"): what
    a named rule read of one side alone ("the bakery" is an employer) does not block them, as
    a verb-object replaces only when the newer one says it changed."""
    return bool(old and new) and all(a.key.startswith(VERB_OBJECT) for a in (*old, *new))


def decide(old: Statement, new: Statement, resolve: Resolver | None = None) -> Decision:
    """The offline decision: does ``new`` supersede ``old``?"""
    old_attrs, new_attrs = parse_attributes(old.content), parse_attributes(new.content)
    if not old_attrs or not new_attrs:  # no named rule knows one of them: their shapes may still match
        old_open, new_open = parse_open_attributes(old.content), parse_open_attributes(new.content)
        if (not old_attrs and not new_attrs) or _verbs_only(old_open, new_open):
            old_attrs, new_attrs = old_open, new_open
    old_ids, new_ids = _Identities(old, resolve), _Identities(new, resolve)
    if not old_attrs or not new_attrs:  # only the subjects fields are known to differ
        if old_ids.people(()) != new_ids.people(()):
            return Decision("coexist", "their subjects differ", final=True)
        return Decision(
            "unknown", "no attribute rule recognises " + ("both" if not old_attrs and not new_attrs else "one of them")
        )
    if old_ids.people(old_attrs) != new_ids.people(new_attrs):
        return Decision("coexist", "they are about different people", final=True)
    reasons, shared_key = [], None
    for old_attr in old_attrs:
        subject = old_ids.of(old_attr)
        same = [n for n in new_attrs if n.key == old_attr.key and subject is not None and new_ids.of(n) == subject]
        if old_attr.implied and not any(_replaces(old_attr, n) for n in same):
            continue  # "I'm single" implies no partner; "I'm dating someone" need not name one
        if not same:
            return Decision("coexist", f"the older one also states {old_attr.key}")
        shared_key = old_attr.key
        if old_ids.first_hand(old_attr) and not any(new_ids.first_hand(n) for n in same):
            return Decision(
                "coexist",
                f"hearsay does not override what {old_attr.subject.phrase} said ({old_attr.key})",
                old_attr.key,
                final=True,
            )
        if old_attr.key.startswith(VERB_OBJECT) and not any(n.changed for n in same):
            # "plays the violin", "plays the piano": both true unless the newer says it changed
            return Decision("unknown", f"{old_attr.key}: the newer one does not say it changed", old_attr.key)
        replacing = [n for n in same if _replaces(old_attr, n)]
        if not replacing:
            multi = old_attr.multi_valued or any(n.multi_valued for n in same)
            why = "several values coexist" if multi else "it does not replace the value"
            return Decision("coexist", f"{old_attr.key}: {why}", old_attr.key, final=multi)
        new_attr = replacing[0]
        change = f"no longer {old_attr.value}" if new_attr.negated else f"{old_attr.value!r} -> {new_attr.value!r}"
        reasons.append(f"{old_attr.key} of {old_attr.subject.phrase}: {change}")
    if not reasons:
        return Decision("unknown", "nothing the older one states is replaced")
    return Decision("conflict", "; ".join(reasons), shared_key)


# -- with an LLM ------------------------------------------------------------------------------


class LlmConflictAnswer(msgspec.Struct, frozen=True):
    """The model's typed answer; anything that does not decode into it is an error."""

    decision: Literal["conflict", "coexist"]
    reason: str = ""


StructT = TypeVar("StructT", bound=msgspec.Struct)
#: ``complete_json(system, messages, struct_type)``: one chat completion decoded into struct_type.
CompleteJson = Callable[[str, list[dict[str, str]], type[StructT]], Awaitable[StructT]]

CONFLICT_SYSTEM_PROMPT = """\
You maintain a personal assistant's long-term memory. Given an older and a newer memory, decide \
whether the newer one makes the older one no longer true.

Answer "conflict" only when both are about the same person (or thing) and the same attribute, and \
the newer one replaces or denies the older: a new home city, employer, job, favorite, name, age, \
relationship status or diet; "no longer", "used to", "quit", "moved away".

Answer "coexist" when both can be true at once: different attributes; different people; a fact \
about a specific person and a general one; one more item of a list (another allergy, language, \
pet, child, hobby, job); similar wording about different things ("likes cats" / "likes dogs"). \
A statement someone made about another person never replaces what that person said about \
themselves. When unsure, answer "coexist": wrongly replacing a memory hides a true fact.

Reply with JSON only: {"decision": "conflict" or "coexist", "reason": "<one short sentence>"}"""


def _describe(label: str, statement: Statement) -> str:
    lines = [f"{label} memory (recorded {statement.created_at or 'at an unknown time'}):", statement.content]
    if statement.subjects:
        lines.append("About: " + ", ".join(statement.subjects))
    lines.append("Said by: " + (statement.speaker or "the user themselves"))
    return "\n".join(lines)


def conflict_messages(old: Statement, new: Statement) -> list[dict[str, str]]:
    """The user message: both texts, their dates, subjects and speakers."""
    return [{"role": "user", "content": _describe("Older", old) + "\n\n" + _describe("Newer", new)}]


async def decide_with_llm(
    old: Statement, new: Statement, complete_json: CompleteJson[LlmConflictAnswer], resolve: Resolver | None = None
) -> Decision:
    """Ask the model unless a structural rule already decides; on any error, the offline rules."""
    offline = decide(old, new, resolve)
    if offline.final:
        return offline
    try:
        answer = await complete_json(CONFLICT_SYSTEM_PROMPT, conflict_messages(old, new), LlmConflictAnswer)
        if not isinstance(answer, LlmConflictAnswer):
            raise TypeError(f"complete_json returned {type(answer).__name__}")
    except Exception as exc:  # noqa: BLE001 - any failure of the model falls back (Cancelled is not an Exception)
        return Decision(offline.verdict, f"LLM failed ({type(exc).__name__}); rules: {offline.reason}", offline.key)
    reason = " ".join(answer.reason.split())[:300] or f"the model answered {answer.decision}"
    return Decision(answer.decision, reason, offline.key, decided_by="llm")
