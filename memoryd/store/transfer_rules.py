"""The export format's rules both engines apply: a memory row as a ``MemoryLine``, a person row
as a ``PersonLine``, which imported memories are live, and how imported people fold into the
people their owner already has.

Each engine reads and writes its own tables; what a line holds and how an import decides is
here once, so a file moves between the engines unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import msgspec

from memoryd.ids import iso_from_ms, ms_from_iso
from memoryd.knowledge import normalise_name
from memoryd.store.admin_records import FORMAT, VERSION, ExportHeader, MemoryLine, PeopleReport, PersonLine
from memoryd.store.people_records import StoredPerson
from memoryd.store.records import PROVENANCE_COLUMNS
from memoryd.store.visibility import scope_kind

_encoder = msgspec.json.Encoder()

#: The memory columns an export reads, in the order ``memory_line`` takes them.
EXPORT_COLUMNS = (
    "id, shared, owner, chat_id, source, content, subjects, metadata, confidence, created_at_ms, "
    "updated_at_ms, expires_at_ms, deleted_at_ms, expiry_recorded_ms, superseded_by, access_count, last_access_ms, "
    f"superseded_at_ms, supersede_reason, key, pinned, {', '.join(PROVENANCE_COLUMNS)}"
)


def ms_or_none(value: str | None) -> int | None:
    """A line's optional ISO 8601 time as the store's milliseconds."""
    return None if value is None else ms_from_iso(value)


def header_line(exported_at_ms: int, user: str | None) -> bytes:
    header = ExportHeader(FORMAT, VERSION, iso_from_ms(exported_at_ms) or "", user)
    return _encoder.encode(header) + b"\n"


def memory_line(row: Sequence[Any]) -> MemoryLine:
    """One row of ``EXPORT_COLUMNS`` as its export line."""
    (id_, shared, owner, chat_id, source, content, subjects, metadata, confidence, created, updated, expires,
     deleted, expiry_recorded, superseded_by, access_count, last_access, superseded_at, reason, key,
     pinned) = row[:21]  # fmt: skip
    provenance = dict(zip(PROVENANCE_COLUMNS, row[21:], strict=True))
    provenance["conversation_private"] = bool(provenance["conversation_private"])
    return MemoryLine(
        id=id_,
        scope=scope_kind(bool(shared)),
        owner=owner,
        chat_id=chat_id,
        source=source,
        content=content,
        subjects=msgspec.json.decode(subjects),
        metadata=msgspec.json.decode(metadata),
        confidence=confidence,
        created_at=iso_from_ms(created) or "",
        updated_at=iso_from_ms(updated) or "",
        expires_at=iso_from_ms(expires),
        deleted_at=iso_from_ms(deleted),
        expiry_recorded_at=iso_from_ms(expiry_recorded),
        superseded_by=superseded_by,
        access_count=access_count,
        last_access_at=iso_from_ms(last_access),
        superseded_at=iso_from_ms(superseded_at),
        supersede_reason=reason,
        key=key,
        pinned=bool(pinned),
        **provenance,
    )


def person_line(row: Sequence[Any], memories: list[str]) -> PersonLine:
    """A person row (id, owner, name, aliases as JSON, relationship, created, updated) and the
    ids of the memories linked to it, as its export line."""
    id_, owner, name, aliases, relationship, created, updated = row[:7]
    return PersonLine(
        id=id_,
        owner=owner,
        name=name,
        aliases=msgspec.json.decode(aliases),
        relationship=relationship,
        created_at=iso_from_ms(created) or "",
        updated_at=iso_from_ms(updated) or "",
        memories=memories,
    )


def write_lines(
    write: Callable[[bytes], object], header: bytes, lines: Iterable[MemoryLine | PersonLine], chunk: int
) -> int:
    """The header and ``lines`` through ``write`` in writes of about ``chunk`` bytes (memory stays
    flat at any store size); how many memory lines."""
    buffer = bytearray(header)
    count = 0
    for line in lines:
        _encoder.encode_into(line, buffer, -1)
        buffer += b"\n"
        count += isinstance(line, MemoryLine)
        if len(buffer) >= chunk:
            write(bytes(buffer))
            buffer.clear()
    write(bytes(buffer))
    return count


def memory_lines(lines: Iterable[MemoryLine | PersonLine], persons: list[PersonLine]) -> Iterator[MemoryLine]:
    """The memory lines of an import, in order; its person lines go to ``persons`` (they are
    linked once every memory is in, whatever the order of the lines)."""
    for line in lines:
        if isinstance(line, PersonLine):
            persons.append(line)
        else:
            yield line


def live_on_import(line: MemoryLine, now_ms: int) -> bool:
    """An imported memory that searches find (it gets an embed job when the store has vectors)."""
    expires_at_ms = ms_or_none(line.expires_at)
    return line.deleted_at is None and line.superseded_by is None and (expires_at_ms is None or expires_at_ms > now_ms)


class PeopleImport:
    """The people-import rules: a person line goes in as a new person, or folds into the person
    its owner already has by that name (the oldest wins a shared name) with the line's aliases
    and relationship, or is refused when it would give its owner more than ``max_people``
    (``report.refused``), as memory.add refuses a subject past the bound."""

    def __init__(self, max_people: int | None) -> None:
        self.report = PeopleReport()
        self._max_people = max_people
        self._by_name: dict[str, dict[str, StoredPerson]] = {}  # owner -> normalised name -> person
        self._have: dict[str, int] = {}  # owner -> how many people they have now

    def place(
        self, line: PersonLine, people_of: Callable[[str], Sequence[StoredPerson]]
    ) -> tuple[StoredPerson, bool] | None:
        """The person ``line`` goes into and whether it is new (the caller inserts it; else it
        saves the merged one), or None when refused.  ``people_of``: the people an owner has,
        oldest first (read once per owner)."""
        named = self._by_name.get(line.owner)
        if named is None:
            named = self._by_name[line.owner] = {}
            owned = people_of(line.owner)
            self._have[line.owner] = len(owned)
            for person in owned:
                named.setdefault(normalise_name(person.name), person)
        known = named.get(normalise_name(line.name))
        if known is None and self._max_people is not None and self._have[line.owner] >= self._max_people:
            self.report.refused.append(line.id)
            return None
        if known is None:
            self._have[line.owner] += 1
            person = StoredPerson(
                0, line.id, line.owner, line.name, list(line.aliases), line.relationship,
                ms_from_iso(line.created_at), ms_from_iso(line.updated_at),
            )  # fmt: skip
            named.setdefault(normalise_name(line.name), person)
            self.report.imported += 1
            return person, True
        for alias in line.aliases:
            known.add_alias(alias)
        known.relationship = known.relationship or line.relationship
        self.report.merged += 1
        return known, False
