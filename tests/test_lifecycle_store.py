"""Store lifecycle: expiry marking, gc past retention, max_entries eviction order, access recording."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

from memoryd.ids import now_ms
from memoryd.store import NewMemory, Scope, Store, consistency, jobs, lifecycle, memories, schema

DAY = lifecycle.DAY_MS
# "Now" for the lifecycle functions, which take it as an argument.  Never in the future: ids
# are minted at the insert time, and the ULID generator stays monotonic past the latest one.
T = now_ms()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "memory.db", readers=2) as s:
        s.configure_vector_space("test:4d", 4)
        yield s


def add_at(
    store: Store,
    content: str,
    at_ms: int,
    *,
    owner: str = "alice",
    chat: str | None = None,
    confidence: float = 1.0,
    expires_at_ms: int | None = None,
) -> str:
    new = NewMemory(
        content=content,
        owner=owner,
        chat_id=chat,
        shared=chat is not None,
        source="test",
        expires_at_ms=expires_at_ms,
        confidence=confidence,
    )
    rowid = store.database.write_sync(memories.insert, new, at_ms)
    return str(store.database.write_sync(lambda db: db.execute("SELECT id FROM memories WHERE rowid = ?", (rowid,)).fetchone()[0]))


def sql(store: Store, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return store.database.write_sync(lambda db: [tuple(row) for row in db.execute(query, params)])


def set_column(store: Store, memory_id: str, column: str, value: object) -> None:
    sql(store, f"UPDATE memories SET {column} = ? WHERE id = ?", (value, memory_id))


def events(store: Store, event: str) -> list[str]:
    return [row[0] for row in sql(store, "SELECT memory_id FROM events WHERE event = ? ORDER BY event_id", (event,))]


def embed_all(store: Store, at_ms: int) -> None:
    """Embed every memory whose job is due at ``at_ms`` (and that is not expired by then)."""
    claimed = store.database.write_sync(jobs.claim_embed, 1000, at_ms)
    vectors = [np.array([1.0, 0.5, 0.25, i + 1.0], dtype=np.float32) for i in range(len(claimed))]
    store.database.write_sync(jobs.complete_embed, list(zip(claimed, vectors, strict=True)), at_ms)


def consistent(store: Store) -> bool:
    return all(finding.ok for finding in store.database.read_sync(consistency.check, T))


# -- expiry -------------------------------------------------------------------------------------


def test_expired_memories_are_audited_once_and_lose_their_embed_job(store: Store) -> None:
    gone = add_at(store, "short lived", T - DAY, expires_at_ms=T - 1)
    later = add_at(store, "still valid", T - DAY, expires_at_ms=T + DAY)
    forever = add_at(store, "no expiry", T - DAY)
    assert lifecycle.mark_expired(store.database, T) == 1
    assert lifecycle.mark_expired(store.database, T) == 0
    assert events(store, "expired") == [gone]
    queued = {row[0] for row in sql(store, "SELECT m.id FROM jobs JOIN memories AS m ON m.rowid = jobs.memory_rowid")}
    assert queued == {later, forever}
    assert consistent(store)


def test_a_deleted_memory_is_not_marked_expired(store: Store) -> None:
    memory_id = add_at(store, "deleted before expiry", T - DAY, expires_at_ms=T - 1)
    set_column(store, memory_id, "deleted_at_ms", T - 2)
    assert lifecycle.mark_expired(store.database, T) == 0


# -- gc -----------------------------------------------------------------------------------------


def test_gc_hard_removes_only_what_was_deleted_or_expired_before_the_retention_cutoff(store: Store) -> None:
    old_deleted = add_at(store, "deleted long ago", T - 60 * DAY)
    new_deleted = add_at(store, "deleted lately", T - 60 * DAY)
    old_expired = add_at(store, "expired long ago", T - 60 * DAY, expires_at_ms=T - 31 * DAY)
    new_expired = add_at(store, "expired lately", T - 60 * DAY, expires_at_ms=T - DAY)
    live = add_at(store, "live and well", T - 60 * DAY)
    embed_all(store, T - 59 * DAY)  # before anything expired: all five get a vector
    for memory_id, at in ((old_deleted, T - 31 * DAY), (new_deleted, T - 29 * DAY)):
        rowid = sql(store, "SELECT rowid FROM memories WHERE id = ?", (memory_id,))[0][0]
        store.database.write_sync(memories.mark_deleted, rowid, at)

    dry = lifecycle.gc(store.database, retention_ms=30 * DAY, now_ms=T, dry_run=True)
    assert (dry.purged_deleted, dry.purged_expired) == (1, 1)
    assert len(sql(store, "SELECT id FROM memories")) == 5

    report = lifecycle.gc(store.database, retention_ms=30 * DAY, now_ms=T)
    assert (report.purged_deleted, report.purged_expired) == (1, 1)
    left = {row[0] for row in sql(store, "SELECT id FROM memories")}
    assert left == {new_deleted, new_expired, live}
    assert set(events(store, "purged")) == {old_deleted, old_expired}
    # The FTS entry, vector and jobs went with the rows: the indexes still match the table.
    assert consistent(store)
    assert len(sql(store, "SELECT memory_rowid FROM vec_g1")) == 2  # new_expired and live
    assert lifecycle.gc(store.database, retention_ms=30 * DAY, now_ms=T).purged == 0


def test_the_audit_trail_of_a_purged_memory_is_pruned_one_retention_period_later(store: Store) -> None:
    purged = add_at(store, "to be purged", T - 90 * DAY)
    kept = add_at(store, "kept", T - 90 * DAY)
    set_column(store, purged, "deleted_at_ms", T - 40 * DAY)
    lifecycle.gc(store.database, retention_ms=30 * DAY, now_ms=T)
    assert sql(store, "SELECT event FROM events WHERE memory_id = ? ORDER BY event_id", (purged,)) == [
        ("added",),
        ("purged",),
    ]
    lifecycle.gc(store.database, retention_ms=30 * DAY, now_ms=T + 29 * DAY)
    assert len(sql(store, "SELECT 1 FROM events WHERE memory_id = ?", (purged,))) == 2
    report = lifecycle.gc(store.database, retention_ms=30 * DAY, now_ms=T + 31 * DAY)
    assert report.events_pruned == 2
    assert sql(store, "SELECT 1 FROM events WHERE memory_id = ?", (purged,)) == []
    assert events(store, "added") == [kept]


# -- max_entries --------------------------------------------------------------------------------


def test_eviction_order_is_expired_then_least_recently_used_then_lowest_confidence(store: Store) -> None:
    recent_expired = add_at(store, "expired but recent", T - DAY, expires_at_ms=T - 1)
    used_lately = add_at(store, "old but used yesterday", T - 200 * DAY)
    set_column(store, used_lately, "last_access_ms", T - DAY - 1)
    sure = add_at(store, "old and sure", T - 100 * DAY, confidence=1.0)
    unsure = add_at(store, "old and unsure", T - 100 * DAY + 1000, confidence=0.3)
    middle = add_at(store, "fifty days old", T - 50 * DAY)
    recent_unsure = add_at(store, "added yesterday, unsure", T - DAY, confidence=0.2)
    recent_sure = add_at(store, "added yesterday, sure", T - DAY, confidence=0.9)

    candidates = store.database.read_sync(lifecycle.eviction_candidates, "u:alice", 100, T, T - 7 * DAY)
    assert [memory_id for _, memory_id, _, _ in candidates] == [
        recent_expired,
        unsure,  # same last-use day as `sure`, lower confidence
        sure,
        middle,
        used_lately,  # created 200 days ago, but retrieved yesterday
        recent_unsure,  # protected: only once nothing older is left
        recent_sure,
    ]

    report = lifecycle.enforce_max_entries(
        store.database, per_user=3, per_chat=0, protect_recent_ms=7 * DAY, now_ms=T
    )
    assert report.evicted == 4
    assert events(store, "evicted") == [recent_expired, unsure, sure, middle]
    live = {row[0] for row in sql(store, "SELECT id FROM memories WHERE deleted_at_ms IS NULL")}
    assert live == {used_lately, recent_unsure, recent_sure}
    assert consistent(store)


def test_recent_memories_are_evicted_only_when_nothing_else_is_left(store: Store) -> None:
    old = add_at(store, "the only old one", T - 30 * DAY)
    recent = [add_at(store, f"recent {i}", T - DAY + i * 1000) for i in range(4)]
    lifecycle.enforce_max_entries(store.database, per_user=2, per_chat=0, protect_recent_ms=7 * DAY, now_ms=T)
    assert events(store, "evicted") == [old, recent[0], recent[1]]
    details = [row[0] for row in sql(store, "SELECT detail FROM events WHERE event = 'evicted' ORDER BY event_id")]
    assert '"recent":false' in details[0] and '"recent":true' in details[1]
    assert '"limit":2' in details[0] and '"reason":"max_entries"' in details[0]


def test_limits_apply_per_user_to_personal_and_per_chat_to_group_memories(store: Store) -> None:
    for i in range(4):
        add_at(store, f"alice personal {i}", T - 30 * DAY + i)
        add_at(store, f"bob personal {i}", T - 30 * DAY + i, owner="bob")
        add_at(store, f"chat one {i}", T - 30 * DAY + i, chat="one")
        add_at(store, f"chat two {i}", T - 30 * DAY + i, chat="two", owner="bob")
    report = lifecycle.enforce_max_entries(store.database, per_user=3, per_chat=2, protect_recent_ms=0, now_ms=T)
    assert report.evicted == 1 + 1 + 2 + 2
    live = dict(sql(store, "SELECT scope_key, count(*) FROM memories WHERE deleted_at_ms IS NULL GROUP BY scope_key"))
    assert live == {"u:alice": 3, "u:bob": 3, "c:one": 2, "c:two": 2}
    unlimited = lifecycle.enforce_max_entries(store.database, per_user=0, per_chat=0, protect_recent_ms=0, now_ms=T)
    assert unlimited.evicted == 0


def test_eviction_of_a_large_excess_runs_in_batches(store: Store) -> None:
    now = T - 30 * DAY
    store.database.write_sync(
        memories.insert_many,
        (NewMemory(f"bulk {i}", "alice", None, False, "test") for i in range(lifecycle.BATCH + 120)),
        now,
    )
    report = lifecycle.enforce_max_entries(store.database, per_user=100, per_chat=0, protect_recent_ms=0, now_ms=T)
    assert report.evicted == lifecycle.BATCH + 20
    assert sql(store, "SELECT count(*) FROM memories WHERE deleted_at_ms IS NULL") == [(100,)]


# -- access recording ---------------------------------------------------------------------------


async def test_search_and_list_record_access_when_flushed(store: Store) -> None:
    tea, _ = await store.add(NewMemory("likes green tea", "alice", None, False, "test"))
    other, _ = await store.add(NewMemory("plays chess", "alice", None, False, "test"))
    await store.search(Scope("alice"), "tea", limit=5, query_vector=None)
    await store.search(Scope("alice"), "green", limit=5, query_vector=None)
    await store.list(Scope("alice"), limit=10)
    # Nothing is written on the search path...
    assert sql(store, "SELECT sum(access_count) FROM memories") == [(0,)]
    assert await store.flush_access() == 2
    counts = dict(sql(store, "SELECT id, access_count FROM memories"))
    assert counts == {tea.id: 3, other.id: 1}
    last = dict(sql(store, "SELECT id, last_access_ms FROM memories"))
    assert all(value is not None and value > now_ms() - 60_000 for value in last.values())
    assert await store.flush_access() == 0


async def test_closing_the_store_writes_pending_access_counts(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Store(path) as first:
        record, _ = await first.add(NewMemory("remember the milk", "alice", None, False, "test"))
        await first.search(Scope("alice"), "milk", limit=5, query_vector=None)
    db = apsw.Connection(str(path))
    try:
        assert db.execute("SELECT access_count FROM memories WHERE id = ?", (record.id,)).fetchone()[0] == 1
    finally:
        db.close()


def test_a_version_1_database_is_migrated_and_keeps_its_memories(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    db = apsw.Connection(str(path))
    with db:
        schema.m001_create_tables(db)
        db.pragma("user_version", 1)
        db.execute(
            "INSERT INTO memories (id, content, owner, shared, scope_key, source, subjects, created_at_ms, "
            "updated_at_ms, confidence, metadata, content_hash) "
            "VALUES ('01JAAAAAAAAAAAAAAAAAAAAAAA', 'old memory', 'alice', 0, 'u:alice', 'test', '[]', 1, 1, 1.0, '{}', 'x')"
        )
    db.close()
    with Store(path) as store:
        assert sql(store, "SELECT id, access_count, last_access_ms FROM memories") == [
            ("01JAAAAAAAAAAAAAAAAAAAAAAA", 0, None)
        ]
        assert sql(store, "PRAGMA user_version") == [(len(schema.MIGRATIONS),)]
