"""Ids: random from the first character, so the 8 characters ash shows name one memory; lists
keep newest-first order and their cursor by time, across old (ULID) and new ids."""

from __future__ import annotations

import pytest

from memoryd.errors import AmbiguousIdPrefix, UnknownListCursor
from memoryd.ids import CROCKFORD, ID_LENGTH, MIN_PREFIX_LENGTH, new_id, new_ulid
from memoryd.store import QueryVector, Scope
from memoryd.store.sqlite import Store
from tests.store_helpers import Clock, note, sql

BURST = 10_000
ALICE = Scope("alice")


def test_new_ids_are_26_crockford_characters_never_starting_like_a_ulid() -> None:
    ids = [new_id() for _ in range(2000)]
    assert all(len(i) == ID_LENGTH and set(i) <= set(CROCKFORD) for i in ids)
    assert {i[0] for i in ids} <= set(CROCKFORD[8:])  # ULIDs start with 0-7
    assert new_ulid()[0] in CROCKFORD[:8]
    # Random in every position: 2000 ids spread over (nearly) all first characters.
    assert len({i[0] for i in ids}) >= 20 and len({i[:MIN_PREFIX_LENGTH] for i in ids}) == len(ids)


async def test_ten_thousand_memories_added_at_once_each_delete_by_its_eight_character_prefix(
    store: Store, clock: Clock
) -> None:
    clock.at = 1_750_000_000_000  # one burst: every memory has the same created_at
    store.memories.add_many(note(f"burst {i}") for i in range(BURST))
    newest_first = [f"burst {i}" for i in reversed(range(BURST))]

    # The list pages through all of them, newest (= last added) first, by cursor.
    listed: list[str] = []
    ids: list[str] = []
    before: str | None = None
    while page := await store.memories.list(ALICE, limit=1000, before_id=before):
        listed += [r.content for r in page]
        ids += [r.id for r in page]
        before = page[-1].id[:MIN_PREFIX_LENGTH]  # ash's short id is a cursor too
    assert listed == newest_first
    assert len({i[:MIN_PREFIX_LENGTH] for i in ids}) == BURST

    for memory_id in ids:
        assert await store.memories.delete(ALICE, memory_id[:MIN_PREFIX_LENGTH]) == memory_id
    assert await store.memories.list(ALICE, limit=10) == []


async def test_old_ulids_and_new_ids_list_in_time_order_and_both_work_as_cursors(store: Store, clock: Clock) -> None:
    # Six memories a second apart; the odd ones get ULIDs, as a store of an older version has.
    for i in range(6):
        clock.at = 1_700_000_000_000 + i * 1000
        await store.memories.add(note(f"m{i}"))
    for i in (1, 3, 5):
        sql(
            store.path,
            "UPDATE memories SET id = ? WHERE content = ?",
            (new_ulid(1_700_000_000_000 + i * 1000), f"m{i}"),
        )
    clock.at = 1_700_000_010_000
    records = await store.memories.list(ALICE, limit=10)
    assert [r.content for r in records] == ["m5", "m4", "m3", "m2", "m1", "m0"]
    assert [r.id[0] in CROCKFORD[:8] for r in records] == [True, False, True, False, True, False]

    for cut in range(5):
        cursor = records[cut].id
        rest = await store.memories.list(ALICE, limit=10, before_id=cursor)
        assert [r.content for r in rest] == [r.content for r in records[cut + 1 :]]
        assert [r.content for r in await store.memories.list(ALICE, limit=2, before_id=cursor[:12])] == [
            r.content for r in records[cut + 1 : cut + 3]
        ]
    # An old id still resolves by prefix, for get and delete.
    old = records[0].id
    got = await store.memories.get(ALICE, old[: MIN_PREFIX_LENGTH + 4])
    assert got is not None and got.content == "m5"


async def test_a_deleted_memory_stays_a_cursor_and_a_stranger_one_is_refused(store: Store, clock: Clock) -> None:
    for i in range(4):
        clock.at = 1_700_000_000_000 + i
        await store.memories.add(note(f"m{i}"))
    records = await store.memories.list(ALICE, limit=10)
    assert await store.memories.delete(ALICE, records[1].id) == records[1].id
    after = await store.memories.list(ALICE, limit=10, before_id=records[1].id)
    assert [r.content for r in after] == ["m1", "m0"]  # after m2, deleted meanwhile
    bobs, _ = await store.memories.add(note("bob's", "bob"))
    with pytest.raises(UnknownListCursor):
        await store.memories.list(ALICE, limit=10, before_id=bobs.id)
    with pytest.raises(UnknownListCursor):
        await store.memories.list(ALICE, limit=10, before_id="Z" * ID_LENGTH)


async def test_two_ulids_of_one_instant_are_still_told_apart_by_a_longer_prefix(store: Store, clock: Clock) -> None:
    clock.at = 1_700_000_000_000
    for content in ("a", "b"):
        await store.memories.add(note(content))
    for content in ("a", "b"):
        sql(store.path, "UPDATE memories SET id = ? WHERE content = ?", (new_ulid(1_700_000_000_000), content))
    first, second = await store.memories.list(ALICE, limit=2)
    assert first.id[:MIN_PREFIX_LENGTH] == second.id[:MIN_PREFIX_LENGTH]
    with pytest.raises(AmbiguousIdPrefix):
        await store.memories.delete(ALICE, first.id[:MIN_PREFIX_LENGTH])
    assert (await store.memories.short_ids(ALICE, [first.id]))[first.id] != first.id[:MIN_PREFIX_LENGTH]
    assert await store.memories.delete(ALICE, first.id) == first.id


def test_a_list_page_walks_the_time_index_without_sorting(store: Store) -> None:
    from memoryd.store.sqlite.visibility_sql import predicate

    scope = Scope("alice", "team", "group")
    where, params = predicate(scope, now_ms=0, key="u:alice")
    for cursor in ("", " AND (memories.created_at_ms, memories.rowid) < (?, ?)"):
        plan = sql(
            store.path,
            f"EXPLAIN QUERY PLAN SELECT memories.id FROM memories WHERE {where}{cursor} "
            "ORDER BY memories.created_at_ms DESC, memories.rowid DESC LIMIT 20",
            (*params, *((5, 5) if cursor else ())),
        )
        details = " ".join(str(row[-1]) for row in plan)
        assert "USING INDEX memories_scope_time" in details and "TEMP B-TREE" not in details, details


async def test_a_store_of_the_previous_schema_is_upgraded_with_its_vectors(store: Store, clock: Clock) -> None:
    from memoryd.store import Provenance
    from memoryd.store.sqlite.schema import ladder as schema
    from tests.store_helpers import embed_all, unit

    store.configure_vector_space("test:upgrade", 4)
    dm, _ = await store.memories.add(note("dm fact", chat_id="dm", provenance=Provenance(chat_type="private")))
    team, _ = await store.memories.add(note("team fact", chat_id="team", provenance=Provenance(chat_type="group")))
    await embed_all(store, {}, unit(4, 1))
    path = store.path
    store.close()
    # Back to the schema before m007: no disclosure column, no time index, the vector table without its
    # disclosure metadata (vectors and all).
    sql(path, "DROP INDEX memories_scope_time")
    sql(path, "ALTER TABLE memories DROP COLUMN disclosure")
    sql(
        path,
        "CREATE TABLE old_vectors AS SELECT v.memory_rowid, v.scope_key, v.expires_at, v.coarse, c.fine AS embedding "
        "FROM vec_g1 AS v JOIN vector_copies AS c ON c.memory_rowid = v.memory_rowid",
    )
    sql(path, "DROP TABLE vec_g1")
    sql(path, "DROP TABLE vector_copies")
    sql(
        path,
        "CREATE VIRTUAL TABLE vec_g1 USING vec0 (memory_rowid INTEGER PRIMARY KEY, scope_key TEXT PARTITION KEY, "
        "expires_at INTEGER, coarse BIT[8], +embedding BLOB, chunk_size = 512)",
    )
    sql(
        path,
        "INSERT INTO vec_g1 SELECT memory_rowid, scope_key, expires_at, vec_bit(coarse), embedding FROM old_vectors",
    )
    sql(path, "DROP TABLE old_vectors")
    sql(path, f"PRAGMA user_version = {schema.version_before(schema.m007_disclosure_and_time_order)}")

    upgraded = Store(path, clock=clock)
    try:
        upgraded.configure_vector_space("test:upgrade", 4)  # the same space: no re-embedding
        assert sql(path, "SELECT count(*) FROM vec_g1") == [(2,)]
        assert (await upgraded.jobs.backlog())["embed"] == 0
        in_group = await upgraded.memories.search(
            Scope("alice", "team", "group"), "", limit=5, vector=QueryVector.at_hand(unit(4, 1))
        )
        assert [h.id for h in in_group] == [team.id] and in_group[0].similarity > 0.99
        in_dm = await upgraded.memories.search(
            Scope("alice", "dm", "private"), "", limit=5, vector=QueryVector.at_hand(unit(4, 1))
        )
        assert {h.id for h in in_dm} == {dm.id, team.id}
        assert upgraded.lifecycle.check() and all(f.ok for f in upgraded.lifecycle.check())
    finally:
        upgraded.close()
