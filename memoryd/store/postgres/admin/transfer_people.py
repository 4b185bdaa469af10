"""People in the export format on PostgreSQL: the SQLite engine's lines and import rules
(``transfer_rules.PeopleImport``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import psycopg

from memoryd.store.admin_records import PeopleReport, PersonLine
from memoryd.store.postgres import people
from memoryd.store.transfer_rules import PeopleImport, person_line
from memoryd.store.visibility import PERSONAL_PREFIX

Conn = psycopg.Connection[Any]


def person_lines(conn: Conn, user: str | None) -> Iterator[PersonLine]:
    """Every person (of ``user``, when given) with the ids of its memories, ordered by id."""
    where, params = ("WHERE p.owner = %s", (user,)) if user is not None else ("", ())
    for row in conn.execute(
        "SELECT p.id, p.owner, p.name, p.aliases, p.relationship, p.created_at_ms, p.updated_at_ms, "
        "coalesce((SELECT array_agg(m.id ORDER BY m.id) FROM memory_people AS l JOIN memories AS m ON m.rowid = l.memory_rowid "
        f"WHERE l.scope_key = p.scope_key AND l.person_rowid = p.rowid), ARRAY[]::text[]) FROM people AS p {where} ORDER BY p.id",
        params,
    ):
        yield person_line(row, list(row[7]))


def import_people(conn: Conn, lines: Iterable[PersonLine], now_ms: int, max_people: int | None = None) -> PeopleReport:
    """The SQLite import's rules (``transfer_rules.PeopleImport``): a new person past
    ``max_people`` for its owner is refused and listed in ``report.refused``."""
    plan = PeopleImport(max_people)
    for line in lines:
        if conn.execute("SELECT 1 FROM people WHERE id = %s", (line.id,)).fetchone() is not None:
            plan.report.already_present += 1
            continue
        placed = plan.place(line, lambda owner: people.people_of(conn, owner))
        if placed is None:
            continue
        person, new = placed
        if new:
            people.insert(conn, person)
        else:
            people.save(conn, person, now_ms)
        conn.execute(
            "INSERT INTO memory_people (scope_key, person_rowid, memory_rowid) SELECT %s, %s, rowid FROM memories "
            "WHERE id = ANY(%s) ON CONFLICT DO NOTHING",
            (PERSONAL_PREFIX + line.owner, person.rowid, list(line.memories)),
        )
    return plan.report
