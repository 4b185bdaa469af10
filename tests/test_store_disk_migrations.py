"""Store: schemas m011 (a memory's row is the record of its add; ``events`` a view), m012 and
m014 (6-bit rescoring copies in ``vector_copies``).  A store of schema 10 upgrades, its audit trail reads the same and its
searches find the same memories."""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pytest

from memoryd.store import QueryVector, Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.admin.transfer import MemoryLine
from memoryd.store.sqlite.schema import ladder as schema
from memoryd.store.sqlite.vectors import vector_codec
from tests.store_helpers import Clock, back_to_schema_12, embed_all, int8_copy, note, random_units, sql

DIM = 384
TRAIL = "SELECT memory_id, event, actor, at_ms, detail FROM events ORDER BY memory_id, event, at_ms"


def page_count(path: Path, table: str) -> int:
    return int(sql(path, "SELECT count(*) FROM dbstat WHERE name = ?", (table,))[0][0])


async def test_an_add_stores_no_event_and_the_events_view_shows_it_from_the_row(tmp_path: Path) -> None:
    clock = Clock(1_700_000_000_000)
    with Store(tmp_path / "m.db", clock=clock) as store:
        record, _ = await store.memories.add(note("bob drinks oolong tea", "bob"))
        clock.at += 5
        await store.memories.delete(Scope("bob"), record.id)
    path = tmp_path / "m.db"
    assert sql(path, "SELECT event FROM audit_events") == [("deleted",)]
    assert sql(path, "SELECT event_id IS NULL, memory_id, event, actor, at_ms FROM events ORDER BY event_id") == [
        (1, record.id, "added", "bob", clock.at - 5),  # NULL sorts first: the add comes first
        (0, record.id, "deleted", "bob", clock.at),
    ]


async def test_an_imported_memory_gets_no_added_event(tmp_path: Path) -> None:
    with Store(tmp_path / "a.db") as source:
        await source.memories.add(note("bob lives in lisbon", "bob"))
        chunks: list[bytes] = []
        source.lifecycle.export(chunks.append, user=None)
    lines = [msgspec.json.decode(line, type=MemoryLine) for line in b"".join(chunks).splitlines()[1:]]
    with Store(tmp_path / "b.db") as target:
        assert target.lifecycle.import_memories(lines).imported == 1
    assert [row[1] for row in sql(tmp_path / "b.db", TRAIL)] == ["imported"]


def back_to_schema_10(path: Path, added: list[tuple[str, str, int]]) -> None:
    """The store as m010 left it: a table ``events`` holding one ``added`` row per memory, and
    int8 rescoring copies (packed into fresh pages, as m008 wrote them)."""
    sql(path, "DROP VIEW events")
    sql(path, "ALTER TABLE audit_events RENAME TO events")
    for memory_id, owner, at_ms in added:
        sql(
            path,
            "INSERT INTO events (memory_id, event, actor, at_ms) VALUES (?, 'added', ?, ?)",
            (memory_id, owner, at_ms),
        )
    back_to_schema_12(path, lambda _, fine: int8_copy(vector_codec.unit_from_fine(fine, DIM)))
    sql(path, f"PRAGMA user_version = {schema.version_before(schema.m011_added_events_from_rows)}")


async def test_a_store_of_schema_10_upgrades_with_the_same_trail_and_the_same_hits(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    stored = random_units(300, 1)
    texts = [f"memory number {i}" for i in range(300)]
    query = stored[7] + 0.4 * random_units(1, 2)[0]
    query /= np.linalg.norm(query)
    with Store(path) as store:
        store.configure_vector_space("test:m012", DIM)
        for text in texts:
            await store.memories.add(note(text))
        await embed_all(store, dict(zip(texts, stored, strict=True)))
        await store.memories.delete(Scope("alice"), (await store.memories.list(Scope("alice"), limit=1))[0].id)
        fresh_pages = page_count(path, "vector_copies")
        before = await store.memories.search(Scope("alice"), "", limit=10, vector=QueryVector.at_hand(query))
    rows = sql(path, "SELECT id, owner, created_at_ms FROM memories ORDER BY rowid")
    # One 'added' row that says something else than its memory's row (an earlier time): kept.
    odd_id, odd_owner, odd_at = rows[0]
    back_to_schema_10(path, [(odd_id, odd_owner, odd_at - 1000), *rows[1:]])
    assert {length for (length,) in sql(path, "SELECT length(embedding) FROM vec_g1")} == {DIM}
    trail = [row for row in sql(path, TRAIL)]
    assert sum(1 for row in trail if row[1] == "added") == 300

    with Store(path) as upgraded:
        upgraded.configure_vector_space("test:m012", DIM)  # the same space: nothing to re-embed
        assert sql(path, "PRAGMA user_version") == [(schema.LATEST,)]
        assert sql(path, TRAIL) == trail
        assert sql(path, "SELECT memory_id, at_ms FROM audit_events WHERE event = 'added'") == [(odd_id, odd_at - 1000)]
        lengths = sql(path, "SELECT DISTINCT length(fine) FROM vector_copies")
        assert lengths == [(vector_codec.fine_length(DIM),)]
        # Written in rowid order, not updated in place: the table's pages are as packed as a fresh store's.
        assert page_count(path, "vector_copies") <= fresh_pages
        after = await upgraded.memories.search(Scope("alice"), "", limit=10, vector=QueryVector.at_hand(query))
        assert all(finding.ok for finding in upgraded.lifecycle.check())
    assert len(before) == len(after) == 10
    assert after[0].id == before[0].id
    assert len({h.id for h in after} & {h.id for h in before}) >= 9  # near ties may swap at the tenth place
    for old, new in zip(before, after, strict=True):
        if old.id == new.id:
            assert new.similarity == pytest.approx(old.similarity, abs=0.01)
    assert sql(path, "PRAGMA integrity_check") == [("ok",)]


async def test_a_purge_stores_the_added_event_from_the_row_except_for_an_imported_memory(tmp_path: Path) -> None:
    added_at, day = 1_700_000_000_000, 86_400_000
    clock = Clock(added_at)
    with Store(tmp_path / "a.db", clock=clock) as source:
        await source.memories.add(note("bob lives in lisbon", "bob"))
        chunks: list[bytes] = []
        source.lifecycle.export(chunks.append, user=None)
    lines = [msgspec.json.decode(chunks[0].splitlines()[1], type=MemoryLine)]
    with Store(tmp_path / "b.db", clock=clock) as store:
        store.lifecycle.import_memories(lines)
        added, _ = await store.memories.add(note("bob drinks oolong tea", "bob"))
        clock.at += 1
        for memory_id in (lines[0].id, added.id):
            await store.memories.delete(Scope("bob"), memory_id)
        clock.at += 40 * day
        assert store.lifecycle.gc(retention_ms=30 * day).purged == 2
    # In time order: the 'added' row is stored at the purge, after the 'deleted' one.
    stored = sql(tmp_path / "b.db", "SELECT memory_id, event, actor, at_ms FROM audit_events ORDER BY at_ms, event_id")
    assert [row[:2] for row in stored if row[0] == lines[0].id] == [
        (lines[0].id, e) for e in ("imported", "deleted", "purged")
    ]
    assert [row for row in stored if row[0] == added.id][0] == (added.id, "added", "bob", added_at)
    assert [row[1] for row in stored if row[0] == added.id] == ["added", "deleted", "purged"]
