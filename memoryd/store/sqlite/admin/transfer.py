"""The export format: versioned JSON Lines, every column of a memory, no vectors.

Line 1 is a header::

    {"format":"memoryd-export","version":2,"exported_at":"2025-01-02T03:04:05.678Z","user":null}

Version 2 added the provenance fields (``chat_type`` ... ``conversation_private``); a version 1
file imports with them unknown.  Version 3 added the people (``transfer_people``), version 4
``pinned`` (older files import with nothing pinned).

The memories follow, one line each (``MemoryLine``), ordered by id, then the people.  Timestamps are ISO 8601 UTC
with milliseconds, exactly the database's integer milliseconds, so export -> import -> export
gives the same bytes except ``exported_at``.  Vectors are not exported (they belong to one
model; the importing store re-embeds); audit events are not exported either (the importing
store records an 'imported' event per memory); nor are the attribute keys supersession looks
up (``memory_attributes``): they follow from the content, and the import derives them again.

Import is idempotent by id: a memory whose id the store already has is skipped, whatever its
content.  Lines are parsed and validated before they get here (``memoryd.admin.import_file``),
so a file is checked completely before the write lock is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import apsw
import msgspec

from memoryd.ids import ms_from_iso
from memoryd.knowledge import attribute_keys
from memoryd.store import transfer_rules
from memoryd.store.admin_records import ImportReport, MemoryLine
from memoryd.store.records import PROVENANCE_COLUMNS
from memoryd.store.sqlite.admin.transfer_people import PersonLine, import_people, person_lines
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.memories import memories
from memoryd.store.sqlite.supersession import supersession
from memoryd.store.sqlite.vectors import vectors
from memoryd.store.transfer_rules import ms_or_none as _ms
from memoryd.store.visibility import key_for

#: The actor of 'imported' audit events.
ACTOR = "admin"


_encoder = msgspec.json.Encoder()
_PROVENANCE = ", ".join(PROVENANCE_COLUMNS)


# -- export -------------------------------------------------------------------------------------


def export_memories(
    db: apsw.Connection, write: Callable[[bytes], object], *, user: str | None, now_ms: int, chunk: int = 1 << 20
) -> int:
    """Write the header, every memory and every person (``user``'s own, when given) through
    ``write``; how many memories.

    Run it in one read snapshot: the export is consistent while the daemon keeps writing.
    Rows stream from the cursor into ~1 MB writes, so memory stays flat at any store size.
    """
    return transfer_rules.write_lines(write, transfer_rules.header_line(now_ms, user), _lines(db, user), chunk)


def _lines(db: apsw.Connection, user: str | None) -> Iterator[MemoryLine | PersonLine]:
    where, params = ("WHERE owner = ?", (user,)) if user is not None else ("", ())
    for row in db.execute(f"SELECT {transfer_rules.EXPORT_COLUMNS} FROM memories {where} ORDER BY id", params):
        yield transfer_rules.memory_line(row)
    yield from person_lines(db, user=user)


# -- import -------------------------------------------------------------------------------------


def import_memories(
    db: apsw.Connection, lines: Iterable[MemoryLine | PersonLine], now_ms: int, *, max_people: int | None = None
) -> ImportReport:
    """Insert the memories and people whose ids are new; run it in ONE write transaction (all or
    nothing).  People are linked after every memory is in, whatever the order of the lines.

    Live memories get an embed job when the store has a vector space (the daemon's backfill
    embeds them; otherwise the first daemon with an embedder queues them at start-up).
    """
    report = ImportReport()
    space = vectors.read_space(db)
    persons: list[PersonLine] = []
    for line in transfer_rules.memory_lines(lines, persons):
        shared = line.scope == "group"
        scope_key = key_for(shared=shared, owner=line.owner, chat_id=line.chat_id)
        expires_at_ms = _ms(line.expires_at)
        deleted_at_ms = _ms(line.deleted_at)
        db.execute(
            f"""
            INSERT INTO memories (rowid, id, content, owner, chat_id, shared, scope_key, source, subjects,
                created_at_ms, updated_at_ms, expires_at_ms, deleted_at_ms, expiry_recorded_ms, superseded_by,
                confidence, metadata, content_hash, access_count, last_access_ms, superseded_at_ms,
                supersede_reason, key, pinned, {_PROVENANCE})
            VALUES ({memories.NEXT_ROWID}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                {", ".join("?" * len(PROVENANCE_COLUMNS))})
            ON CONFLICT (id) DO NOTHING
            """,
            (
                line.id,
                line.content,
                line.owner,
                line.chat_id,
                int(shared),
                scope_key,
                line.source,
                _encoder.encode(line.subjects).decode(),
                ms_from_iso(line.created_at),
                ms_from_iso(line.updated_at),
                expires_at_ms,
                deleted_at_ms,
                _ms(line.expiry_recorded_at),
                line.superseded_by,
                float(line.confidence),
                _encoder.encode(line.metadata).decode(),
                memories.content_hash(line.content),
                line.access_count,
                _ms(line.last_access_at),
                _ms(line.superseded_at),
                line.supersede_reason,
                line.key,
                int(line.pinned),
                *(getattr(line, name) for name in PROVENANCE_COLUMNS),
            ),
        )
        if db.changes() == 0:
            report.already_present += 1
            continue
        report.imported += 1
        rowid = db.last_insert_rowid()
        memories.audit(db, line.id, "imported", ACTOR, now_ms, {})
        # What an add records, so that a newer fact still supersedes an imported one.
        supersession.record_attributes(db, scope_key, rowid, attribute_keys(line.content))
        if space is not None and transfer_rules.live_on_import(line, now_ms):
            jobs.enqueue_embed(db, rowid, now_ms)
            report.embed_jobs += 1
    report.people = import_people(db, persons, now_ms, max_people=max_people)
    return report
