"""The offline summary: the caller's memories grouped by person, then by type, newest first.

Deterministic (same memories, same text) and bounded by ``max_chars``; also the list of facts
an LLM is given to write the narrative from.
"""

from __future__ import annotations

from memoryd.knowledge import normalise_name
from memoryd.store import StoredPerson, SummaryMaterial

__all__ = ["SummaryMaterial", "digest", "facts_for_llm", "person_label"]

#: Types first in the digest (ash's set); any other type follows alphabetically.
TYPE_ORDER = ("identity", "relationship", "preference", "knowledge", "context", "event", "task")


def person_label(person: StoredPerson) -> str:
    return f"{person.name} ({person.relationship})" if person.relationship else person.name


def _one_line(text: str) -> str:
    return " ".join(text.split()).rstrip(".")


def _groups(material: SummaryMaterial) -> list[tuple[str, list[str]]]:
    """(heading, facts newest first): one group per person, then one per memory type."""
    by_name = {normalise_name(p.name): p for p in material.people}
    per_person: dict[str, list[str]] = {p.id: [] for p in material.people}
    per_type: dict[str, list[str]] = {}
    for record in material.records:
        linked = [by_name[n] for n in map(normalise_name, record.about) if n in by_name]
        if linked:
            per_person[linked[0].id].append(_one_line(record.content))
        else:
            per_type.setdefault(record.memory_type, []).append(_one_line(record.content))
    groups = [(person_label(p), per_person[p.id]) for p in material.people if per_person[p.id]]
    known = [t for t in TYPE_ORDER if t in per_type]
    others = sorted(t for t in per_type if t not in TYPE_ORDER)
    groups += [(kind.capitalize(), per_type[kind]) for kind in known + others]
    return groups


def digest(material: SummaryMaterial, max_chars: int) -> str:
    """ "Sarah (wife): Sarah likes Italian food; ...", one line per group, at most ``max_chars``."""
    if not material.records:
        return ""
    lines: list[str] = []
    used = 0
    for heading, facts in _groups(material):
        line = f"{heading}: "
        shown = 0
        for fact in facts:
            piece = ("; " if shown else "") + fact
            if used + len(line) + len(piece) + 1 > max_chars:
                break
            line += piece
            shown += 1
        if shown:
            lines.append(line + ".")
            used += len(line) + 2
    return "\n".join(lines)


def facts_for_llm(material: SummaryMaterial) -> str:
    """The numbered facts an LLM writes the narrative from, oldest first, people named."""
    people = "\n".join(f"- {person_label(p)}" for p in material.people) or "- (none known)"
    facts = "\n".join(
        f"{n}. [{r.memory_type}, {r.created_at[:10]}] {_one_line(r.content)}"
        + (f" (about: {', '.join(r.about)})" if r.about else "")
        for n, r in enumerate(reversed(material.records), start=1)
    )
    return f"People in the user's life:\n{people}\n\nFacts:\n{facts}"
