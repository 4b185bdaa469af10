"""Supersession's value types: what an add asks (``Plan``), what a judge decides (``Ruling``),
what was stored (``Stored``), and a queued ``supersede`` job."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryd.errors import SupersedeRefused
from memoryd.store.records import EPISODE, EmbedJob, MemoryRecord
from memoryd.store.visibility import Scope, kind_of_key


@dataclass(frozen=True)
class SupersedeJob:
    job_id: int
    memory_rowid: int
    attempts: int


#: The reason of a refused ``supersedes`` that names nothing visible (the words memory.get uses).
NOT_VISIBLE = "no visible memory has this id or prefix"


def same_subjects(a: Sequence[str], b: Sequence[str]) -> bool:
    """A fact about Sarah never replaces a general one, nor the reverse."""
    return {s.casefold() for s in a} == {s.casefold() for s in b}


def same_author(old: MemoryRecord, new: MemoryRecord) -> bool:
    """Whether ``new`` may replace ``old`` on its own judgement (rules, LLM, upsert key): both
    were added by the same user.  In a group chat Bob's "I live in Paris" is about Bob: it never
    replaces Alice's "I live in Berlin" (who said what under one user id, the rules judge from
    the speakers: ``knowledge.conflict``)."""
    return old.owner == new.owner


def may_replace(old: MemoryRecord, new: MemoryRecord) -> bool:
    """Whether ``new`` is about the same subjects as ``old`` and by the same author: the
    candidates a key, a judge or a job may replace."""
    return same_subjects(old.subjects, new.subjects) and same_author(old, new)


def attribute_candidate(old: MemoryRecord, new: MemoryRecord) -> bool:
    """Whether ``old``, found by a shared attribute or as a vector neighbour, may be replaced
    by ``new``: as ``may_replace``, and never an episode (it records what was said, then)."""
    return old.memory_type != EPISODE and may_replace(old, new)


def refuse_unreplaceable(
    target_key: str, new_key: str, superseded_by: str | None, successor_visible: Callable[[str], bool]
) -> None:
    """Raise SupersedeRefused when the visible memory an add names in ``supersedes`` cannot be
    replaced by it: it lies in another scope, or it was already superseded.  The successor is
    named only when ``successor_visible`` says the caller may see it (it may be a private chat's)."""
    if target_key != new_key:
        raise SupersedeRefused(
            f"is a {kind_of_key(target_key)} memory and the new one is {kind_of_key(new_key)}: "
            "a memory only replaces one of its own scope",
            found=True,
        )
    if superseded_by is not None:
        seen = successor_visible(superseded_by)
        raise SupersedeRefused(f"was already superseded{f' by {superseded_by}' if seen else ''}", found=True)


@dataclass(frozen=True)
class Ruling:
    """One decision: does the new memory replace the old one, why, and who decided."""

    supersedes: bool
    reason: str
    decided_by: str  # rules, llm, explicit, key
    attribute: str | None = None


#: (older, newer) -> Ruling; runs inside the write transaction, so it must be quick and pure.
Judge = Callable[[MemoryRecord, MemoryRecord], Ruling]


@dataclass(frozen=True)
class Plan:
    """What the service asks of an add, beyond storing it."""

    attributes: tuple[str, ...] = ()  # the attribute keys the new memory sets
    supersedes: str | None = None  # a normalised id or prefix the caller names
    key: str | None = None  # the caller's upsert key
    judge: Judge | None = None  # decide now (offline rules) ...
    defer: bool = False  # ... or queue a 'supersede' job for the LLM
    max_candidates: int = 5
    #: Learn the stored memory's people in the same transaction (``people_learning``), the
    #: owner going by these names; None: the caller learns them (or nobody does).
    owner_names: tuple[str, ...] | None = None
    #: limits.max_people_per_owner: a subject that would create a person past it is refused.
    max_people: int | None = None
    #: The adder embeds the text itself, at once: its job comes back leased (``Stored.embed_job``).
    embeds_itself: bool = False


@dataclass
class Stored:
    record: MemoryRecord
    #: The stored row (the duplicate's, when ``deduplicated``), for callers in the same transaction.
    rowid: int
    deduplicated: bool
    superseded: list[str] = field(default_factory=list)  # ids this add replaced
    #: The shortest prefix naming the memory among what the adder sees (``lookup.short_ids``).
    short_id: str = ""
    #: Learning changed the owner's people (created, renamed, aliased): their caches are stale.
    people_changed: bool = False
    #: The owner's people afterwards (when learned here).
    people_count: int | None = None
    #: The new memory's embed job, leased to the adder (``Plan.embeds_itself``).
    embed_job: EmbedJob | None = None


def learned_scope(record: MemoryRecord) -> Scope:
    """The caller a memory was added by, as far as its provenance tells: the background
    (LLM) decision judges only what that caller could see."""
    # A chat whose type the memory does not record counts as a group (fail closed).
    return Scope(record.owner, chat_id=record.chat_id, chat_type=record.chat_type, verified=record.chat_id is not None)


def superseded_detail(new_id: str, ruling: Ruling) -> dict[str, Any]:
    """The 'superseded' audit event's detail.  Ids and kinds only: the reason quotes values
    ("'red' -> 'blue'"), which are memory contents."""
    return {"by": new_id, "decided_by": ruling.decided_by, "attribute": ruling.attribute}


#: Links history follows at most (a chain is a handful of versions; this bounds a cycle bug).
MAX_CHAIN = 200


def version_chain(
    start: str,
    read: Callable[[str], tuple[int, MemoryRecord] | None],
    replaced_by: Callable[[str], Iterable[str]],
) -> list[MemoryRecord]:
    """The versions linked to memory ``start``, both ways, oldest first.  ``read``: the rowid and
    record of a memory the caller may see (None: not followed, so a chain never reaches into a
    scope the caller cannot see); ``replaced_by``: the ids of the memories an id superseded."""
    seen: dict[str, MemoryRecord] = {}
    order: dict[str, int] = {}  # rowid: ids carry no time (ids.py), rowids grow with it
    frontier = [start]
    while frontier and len(seen) < MAX_CHAIN:
        memory_id = frontier.pop()
        if memory_id in seen:
            continue
        found = read(memory_id)
        if found is None:
            continue
        order[memory_id], record = found
        seen[memory_id] = record
        if record.superseded_by is not None:
            frontier.append(record.superseded_by)
        frontier += replaced_by(memory_id)
    return sorted(seen.values(), key=lambda record: (record.created_at, order[record.id]))
