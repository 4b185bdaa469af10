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

from memoryd.store.admin_records import PeopleReport, PersonLine
from memoryd.store.sqlite.people import people
from memoryd.store.transfer_rules import PeopleImport, person_line


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
    for row in rows:
        yield person_line(row, msgspec.json.decode(row[7]))


def import_people(
    db: apsw.Connection, lines: Iterable[PersonLine], now_ms: int, *, max_people: int | None = None
) -> PeopleReport:
    """Insert the people whose ids are new and link them to the memories the store has; run it
    in the import's one write transaction, after its memories.  A new person that would give its
    owner more than ``max_people`` is refused (``report.refused``), as memory.add refuses a
    subject past the bound; a line folded into a person the owner has still goes in."""
    plan = PeopleImport(max_people)
    for line in lines:
        if db.execute("SELECT 1 FROM people WHERE id = ?", (line.id,)).fetchone() is not None:
            plan.report.already_present += 1
            continue
        placed = plan.place(line, lambda owner: people.people_of(db, owner))
        if placed is None:
            continue
        person, new = placed
        if new:
            people.insert(db, person)
        else:
            people.save(db, person, now_ms)
        db.execute(
            "INSERT OR IGNORE INTO memory_people (person_rowid, memory_rowid) "
            "SELECT ?, rowid FROM memories WHERE id IN (SELECT value FROM json_each(?))",
            (person.rowid, msgspec.json.encode(line.memories).decode()),
        )
    return plan.report
