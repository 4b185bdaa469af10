"""People in the export format (version 3): one line per person, after the memories.

A person line carries the person's own columns and the ids of the memories linked to it::

    {"record":"person","id":"01JC…","owner":"alice","name":"Sarah","aliases":["my wife"],
     "relationship":"wife","created_at":"…","updated_at":"…","memories":["01JD…","01JE…"]}

Memory lines have no ``record`` field (versions 1 and 2 had only memories), so a reader tells
the two apart by it.  Import is idempotent like the memories': a person whose id the store has
is skipped.  A person of the same owner the store already knows by that name (learned again
since, with another id) takes the line's aliases, relationship and links instead of a second
entry, the way the people rules merge.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import apsw
import msgspec

from memoryd.ids import iso_from_ms, ms_from_iso
from memoryd.knowledge import normalise_name
from memoryd.store.admin_records import PeopleReport, PersonLine
from memoryd.store.sqlite.people import people


def person_lines(db: apsw.Connection, *, user: str | None) -> Iterator[PersonLine]:
    """Every person (of ``user``, when given) with its links, ordered by id."""
    where, params = ("WHERE owner = ?", (user,)) if user is not None else ("", ())
    rows = db.execute(
        f"""
        SELECT people.id, owner, name, aliases, relationship, people.created_at_ms, people.updated_at_ms,
            (SELECT json_group_array(id) FROM (
                SELECT memories.id AS id FROM memory_people JOIN memories ON memories.rowid = memory_rowid
                WHERE person_rowid = people.rowid ORDER BY memories.id))
        FROM people {where} ORDER BY people.id
        """,
        params,
    )
    for id_, owner, name, aliases, relationship, created, updated, linked in rows:
        yield PersonLine(
            id=id_,
            owner=owner,
            name=name,
            aliases=msgspec.json.decode(aliases),
            relationship=relationship,
            created_at=iso_from_ms(created) or "",
            updated_at=iso_from_ms(updated) or "",
            memories=msgspec.json.decode(linked),
        )


def import_people(
    db: apsw.Connection, lines: Iterable[PersonLine], now_ms: int, *, max_people: int | None = None
) -> PeopleReport:
    """Insert the people whose ids are new and link them to the memories the store has; run it
    in the import's one write transaction, after its memories.  A new person that would give its
    owner more than ``max_people`` is refused (``report.refused``), as memory.add refuses a
    subject past the bound; a line folded into a person the owner has still goes in."""
    report = PeopleReport()
    by_name: dict[str, dict[str, people.StoredPerson]] = {}  # owner -> normalised name -> person
    have: dict[str, int] = {}  # owner -> how many people they have now
    for line in lines:
        if db.execute("SELECT 1 FROM people WHERE id = ?", (line.id,)).fetchone() is not None:
            report.already_present += 1
            continue
        named = by_name.get(line.owner)
        if named is None:
            named = by_name[line.owner] = {}
            owned = people.people_of(db, line.owner)
            have[line.owner] = len(owned)
            for person in owned:  # oldest first: it wins a shared name
                named.setdefault(normalise_name(person.name), person)
        known = named.get(normalise_name(line.name))
        if known is None and max_people is not None and have[line.owner] >= max_people:
            report.refused.append(line.id)
            continue
        if known is None:
            have[line.owner] += 1
            person = people.StoredPerson(
                0, line.id, line.owner, line.name, list(line.aliases), line.relationship,
                ms_from_iso(line.created_at), ms_from_iso(line.updated_at),
            )  # fmt: skip
            people.insert(db, person)
            named.setdefault(normalise_name(line.name), person)
            rowid = person.rowid
            report.imported += 1
        else:
            for alias in line.aliases:
                known.add_alias(alias)
            known.relationship = known.relationship or line.relationship
            people.save(db, known, now_ms)
            rowid = known.rowid
            report.merged += 1
        db.execute(
            "INSERT OR IGNORE INTO memory_people (person_rowid, memory_rowid) "
            "SELECT ?, rowid FROM memories WHERE id IN (SELECT value FROM json_each(?))",
            (rowid, msgspec.json.encode(line.memories).decode()),
        )
    return report
