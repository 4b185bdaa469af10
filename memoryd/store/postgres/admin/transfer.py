"""Export and import on PostgreSQL, in the SQLite engine's format (``transfer_rules``), so a
file moves between the engines."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import psycopg

from memoryd.ids import ms_from_iso
from memoryd.knowledge import attribute_keys
from memoryd.store import transfer_rules
from memoryd.store.admin_records import ImportReport, MemoryLine, PersonLine
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres.admin.transfer_people import import_people, person_lines
from memoryd.store.records import PROVENANCE_COLUMNS, NewMemory, Provenance
from memoryd.store.transfer_rules import ms_or_none as _ms
from memoryd.store.visibility import key_for

Conn = psycopg.Connection[Any]
#: The actor of 'imported' audit events.
IMPORT_ACTOR = "admin"


def export(conn: Conn, write: Callable[[bytes], object], user: str | None, now_ms: int, chunk: int = 1 << 20) -> int:
    """The SQLite backend's export format, from one snapshot (REPEATABLE READ); how many memories."""
    return transfer_rules.write_lines(write, transfer_rules.header_line(now_ms, user), _lines(conn, user), chunk)


def _lines(conn: Conn, user: str | None) -> Iterator[MemoryLine | PersonLine]:
    where, params = ("WHERE owner = %s", (user,)) if user is not None else ("", ())
    # A server-side cursor: the rows stream, the daemon never holds the whole store.
    with conn.cursor(name="export") as cursor:
        cursor.execute(f"SELECT {transfer_rules.EXPORT_COLUMNS} FROM memories {where} ORDER BY id", params)
        for row in cursor:
            yield transfer_rules.memory_line(row)
    yield from person_lines(conn, user)


def import_lines(
    conn: Conn, lines: Iterable[MemoryLine | PersonLine], now_ms: int, max_people: int | None = None
) -> ImportReport:
    """Insert the memories and people whose ids are new, all in this transaction."""
    report = ImportReport()
    generation = rows.vector_generation(conn)
    persons: list[PersonLine] = []
    for line in transfer_rules.memory_lines(lines, persons):
        shared = line.scope == "group"
        scope_key = key_for(shared=shared, owner=line.owner, chat_id=line.chat_id)
        if conn.execute("SELECT 1 FROM memories WHERE id = %s", (line.id,)).fetchone() is not None:
            report.already_present += 1
            continue
        provenance = Provenance(**{name: getattr(line, name) for name in PROVENANCE_COLUMNS})
        new = NewMemory(content=line.content, owner=line.owner, chat_id=line.chat_id, shared=shared, source=line.source,
                        subjects=list(line.subjects), expires_at_ms=_ms(line.expires_at), metadata=dict(line.metadata),
                        confidence=float(line.confidence), provenance=provenance)  # fmt: skip
        rowid, _ = rows.insert(
            conn, new, now_ms, memory_id=line.id, created_at_ms=ms_from_iso(line.created_at), queue_embed=False
        )
        deleted_at_ms = _ms(line.deleted_at)
        conn.execute(
            "UPDATE memories SET updated_at_ms = %s, deleted_at_ms = %s, expiry_recorded_ms = %s, superseded_by = %s, "
            "access_count = %s, last_access_ms = %s, superseded_at_ms = %s, supersede_reason = %s, key = %s, pinned = %s "
            "WHERE rowid = %s",
            (ms_from_iso(line.updated_at), deleted_at_ms, _ms(line.expiry_recorded_at), line.superseded_by, line.access_count,
             _ms(line.last_access_at), _ms(line.superseded_at), line.supersede_reason, line.key, bool(line.pinned), rowid),
        )  # fmt: skip
        report.imported += 1
        rows.audit(conn, scope_key, line.id, "imported", IMPORT_ACTOR, now_ms, {})
        for attribute in attribute_keys(line.content):
            conn.execute(
                "INSERT INTO memory_attributes (scope_key, attribute, memory_rowid) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (scope_key, attribute, rowid),
            )
        if generation is not None and transfer_rules.live_on_import(line, now_ms):
            rows.enqueue(conn, scope_key, rows.EMBED, rowid, now_ms)
            report.embed_jobs += 1
    report.people = import_people(conn, persons, now_ms, max_people)
    if report.embed_jobs:
        job_rows.notify(conn)
    return report
