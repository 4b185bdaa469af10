"""Store lifecycle: expiry marking, gc past retention, max_entries eviction order, hit counting."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryd.ids import DAY_MS as DAY
from memoryd.ids import now_ms
from memoryd.store import Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.admin import retention
from memoryd.store.sqlite.db.database import open_connection
from memoryd.store.sqlite.schema import ladder as schema
from tests.store_helpers import Clock, embed_all, note
from tests.store_helpers import sql as sql_on

# "Now" for the lifecycle, which reads the store's clock.  Never in the future: ids are minted
# at the insert time, and the ULID generator stays monotonic past the latest one.
T = now_ms()


@pytest.fixture
def store(store: Store, clock: Clock) -> Iterator[Store]:
    store.configure_vector_space("test:4d", 4)
    clock.at = T
    yield store


async def add_at(
    store: Store,
    clock: Clock,
    content: str,
    at_ms: int,
    *,
    owner: str = "alice",
    chat: str | None = None,
    confidence: float = 1.0,
    expires_at_ms: int | None = None,
) -> str:
    """Add a memory as if at ``at_ms`` (the clock goes back to T afterwards)."""
    clock.at = at_ms
    try:
        new = note(
            content, owner, chat_id=chat, shared=chat is not None, expires_at_ms=expires_at_ms, confidence=confidence
        )
        record, _ = await store.memories.add(new)
        return record.id
    finally:
        clock.at = T


def sql(store: Store, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return sql_on(store.path, query, params)


def set_column(store: Store, memory_id: str, column: str, value: object) -> None:
    sql(store, f"UPDATE memories SET {column} = ? WHERE id = ?", (value, memory_id))


def events(store: Store, event: str) -> list[str]:
    return [row[0] for row in sql(store, "SELECT memory_id FROM events WHERE event = ? ORDER BY event_id", (event,))]


async def embed_at(store: Store, clock: Clock, at_ms: int) -> None:
    """Embed every memory whose job is due at ``at_ms`` (and that is not expired by then)."""
    clock.at = at_ms
    counter = iter(range(1, 10_000))
    await embed_all(store, lambda content: np.array([1.0, 0.5, 0.25, next(counter)], dtype=np.float32))
    clock.at = T


def consistent(store: Store) -> bool:
    return all(finding.ok for finding in store.lifecycle.check())


# -- expiry -------------------------------------------------------------------------------------


async def test_expired_memories_are_audited_once_and_lose_their_embed_job(store: Store, clock: Clock) -> None:
    gone = await add_at(store, clock, "short lived", T - DAY, expires_at_ms=T - 1)
    later = await add_at(store, clock, "still valid", T - DAY, expires_at_ms=T + DAY)
    forever = await add_at(store, clock, "no expiry", T - DAY)
    assert store.lifecycle.mark_expired() == 1
    assert store.lifecycle.mark_expired() == 0
    assert events(store, "expired") == [gone]
    queued = {row[0] for row in sql(store, "SELECT m.id FROM jobs JOIN memories AS m ON m.rowid = jobs.memory_rowid")}
    assert queued == {later, forever}
    assert consistent(store)


async def test_a_deleted_memory_is_not_marked_expired(store: Store, clock: Clock) -> None:
    memory_id = await add_at(store, clock, "deleted before expiry", T - DAY, expires_at_ms=T - 1)
    set_column(store, memory_id, "deleted_at_ms", T - 2)
    assert store.lifecycle.mark_expired() == 0


# -- gc -----------------------------------------------------------------------------------------


async def test_gc_hard_removes_only_what_was_deleted_or_expired_before_the_retention_cutoff(
    store: Store, clock: Clock
) -> None:
    old_deleted = await add_at(store, clock, "deleted long ago", T - 60 * DAY)
    new_deleted = await add_at(store, clock, "deleted lately", T - 60 * DAY)
    old_expired = await add_at(store, clock, "expired long ago", T - 60 * DAY, expires_at_ms=T - 31 * DAY)
    new_expired = await add_at(store, clock, "expired lately", T - 60 * DAY, expires_at_ms=T - DAY)
    live = await add_at(store, clock, "live and well", T - 60 * DAY)
    await embed_at(store, clock, T - 59 * DAY)  # before anything expired: all five get a vector
    for memory_id, at in ((old_deleted, T - 31 * DAY), (new_deleted, T - 29 * DAY)):
        clock.at = at
        assert await store.memories.delete(Scope("alice"), memory_id) == memory_id
    clock.at = T

    dry = store.lifecycle.gc(retention_ms=30 * DAY, dry_run=True)
    assert dry.purged_by_reason == Counter(deleted=1, expired=1)
    assert len(sql(store, "SELECT id FROM memories")) == 5

    report = store.lifecycle.gc(retention_ms=30 * DAY)
    assert report.purged_by_reason == dry.purged_by_reason
    left = {row[0] for row in sql(store, "SELECT id FROM memories")}
    assert left == {new_deleted, new_expired, live}
    assert set(events(store, "purged")) == {old_deleted, old_expired}
    # The FTS entry, vector and jobs went with the rows: the indexes still match the table.
    assert consistent(store)
    assert len(sql(store, "SELECT memory_rowid FROM vec_g1")) == 2  # new_expired and live
    assert store.lifecycle.gc(retention_ms=30 * DAY).purged == 0


async def test_the_audit_trail_of_a_purged_memory_is_pruned_one_retention_period_later(
    store: Store, clock: Clock
) -> None:
    purged = await add_at(store, clock, "to be purged", T - 90 * DAY)
    kept = await add_at(store, clock, "kept", T - 90 * DAY)
    set_column(store, purged, "deleted_at_ms", T - 40 * DAY)
    store.lifecycle.gc(retention_ms=30 * DAY)
    assert sql(store, "SELECT event FROM events WHERE memory_id = ? ORDER BY event_id", (purged,)) == [
        ("added",),
        ("purged",),
    ]
    clock.at = T + 29 * DAY
    store.lifecycle.gc(retention_ms=30 * DAY)
    assert len(sql(store, "SELECT 1 FROM events WHERE memory_id = ?", (purged,))) == 2
    clock.at = T + 31 * DAY
    report = store.lifecycle.gc(retention_ms=30 * DAY)
    assert report.events_pruned == 2
    assert sql(store, "SELECT 1 FROM events WHERE memory_id = ?", (purged,)) == []
    assert events(store, "added") == [kept]


# -- max_entries --------------------------------------------------------------------------------


async def test_eviction_order_is_expired_then_least_recently_used_then_lowest_confidence(
    store: Store, clock: Clock
) -> None:
    recent_expired = await add_at(store, clock, "expired but recent", T - DAY, expires_at_ms=T - 1)
    used_lately = await add_at(store, clock, "old but used yesterday", T - 200 * DAY)
    set_column(store, used_lately, "last_access_ms", T - DAY - 1)
    sure = await add_at(store, clock, "old and sure", T - 100 * DAY, confidence=1.0)
    unsure = await add_at(store, clock, "old and unsure", T - 100 * DAY + 1000, confidence=0.3)
    middle = await add_at(store, clock, "fifty days old", T - 50 * DAY)
    recent_unsure = await add_at(store, clock, "added yesterday, unsure", T - DAY, confidence=0.2)
    recent_sure = await add_at(store, clock, "added yesterday, sure", T - DAY, confidence=0.9)

    report = store.lifecycle.enforce_max_entries(per_user=3, per_chat=0, protect_recent_ms=7 * DAY)
    assert report.evicted == 4
    assert events(store, "evicted") == [recent_expired, unsure, sure, middle]
    live = {row[0] for row in sql(store, "SELECT id FROM memories WHERE deleted_at_ms IS NULL")}
    assert live == {used_lately, recent_unsure, recent_sure}
    assert consistent(store)
    # The rest of the order, down to the last memory a scope keeps.
    store.lifecycle.enforce_max_entries(per_user=1, per_chat=0, protect_recent_ms=7 * DAY)
    assert events(store, "evicted") == [
        recent_expired,
        unsure,  # same last-use day as `sure`, lower confidence
        sure,
        middle,
        used_lately,  # created 200 days ago, but retrieved yesterday
        recent_unsure,  # protected: only once nothing older is left
    ]


async def test_recent_memories_are_evicted_only_when_nothing_else_is_left(store: Store, clock: Clock) -> None:
    old = await add_at(store, clock, "the only old one", T - 30 * DAY)
    recent = [await add_at(store, clock, f"recent {i}", T - DAY + i * 1000) for i in range(4)]
    store.lifecycle.enforce_max_entries(per_user=2, per_chat=0, protect_recent_ms=7 * DAY)
    assert events(store, "evicted") == [old, recent[0], recent[1]]
    details = [row[0] for row in sql(store, "SELECT detail FROM events WHERE event = 'evicted' ORDER BY event_id")]
    assert '"recent":false' in details[0] and '"recent":true' in details[1]
    assert '"limit":2' in details[0] and '"reason":"max_entries"' in details[0]


async def test_limits_apply_per_user_to_personal_and_per_chat_to_group_memories(store: Store, clock: Clock) -> None:
    for i in range(4):
        await add_at(store, clock, f"alice personal {i}", T - 30 * DAY + i)
        await add_at(store, clock, f"bob personal {i}", T - 30 * DAY + i, owner="bob")
        await add_at(store, clock, f"chat one {i}", T - 30 * DAY + i, chat="one")
        await add_at(store, clock, f"chat two {i}", T - 30 * DAY + i, chat="two", owner="bob")
    report = store.lifecycle.enforce_max_entries(per_user=3, per_chat=2, protect_recent_ms=0)
    assert report.evicted == 1 + 1 + 2 + 2
    live = dict(sql(store, "SELECT scope_key, count(*) FROM memories WHERE deleted_at_ms IS NULL GROUP BY scope_key"))
    assert live == {"u:alice": 3, "u:bob": 3, "c:one": 2, "c:two": 2}
    unlimited = store.lifecycle.enforce_max_entries(per_user=0, per_chat=0, protect_recent_ms=0)
    assert unlimited.evicted == 0


async def test_eviction_of_a_large_excess_runs_in_batches(store: Store, clock: Clock) -> None:
    clock.at = T - 30 * DAY
    store.memories.add_many(note(f"bulk {i}") for i in range(retention.BATCH + 120))
    clock.at = T
    report = store.lifecycle.enforce_max_entries(per_user=100, per_chat=0, protect_recent_ms=0)
    assert report.evicted == retention.BATCH + 20
    assert sql(store, "SELECT count(*) FROM memories WHERE deleted_at_ms IS NULL") == [(100,)]


# -- hit counting -------------------------------------------------------------------------------


async def test_search_and_list_record_access_when_flushed(store: Store) -> None:
    tea, _ = await store.memories.add(note("likes green tea"))
    other, _ = await store.memories.add(note("plays chess"))
    await store.memories.search(Scope("alice"), "tea", limit=5)
    await store.memories.search(Scope("alice"), "green", limit=5)
    await store.memories.list(Scope("alice"), limit=10)
    # Nothing is written on the search path...
    assert sql(store, "SELECT sum(access_count) FROM memories") == [(0,)]
    assert await store.lifecycle.flush_hits() == 2
    counts = dict(sql(store, "SELECT id, access_count FROM memories"))
    assert counts == {tea.id: 3, other.id: 1}
    last = dict(sql(store, "SELECT id, last_access_ms FROM memories"))
    assert all(value == T for value in last.values())
    assert await store.lifecycle.flush_hits() == 0


async def test_closing_the_store_writes_pending_access_counts(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Store(path) as first:
        record, _ = await first.memories.add(note("remember the milk"))
        await first.memories.search(Scope("alice"), "milk", limit=5)
    assert sql_on(path, "SELECT access_count FROM memories WHERE id = ?", (record.id,)) == [(1,)]


def test_a_version_1_database_is_migrated_and_keeps_its_memories(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    db = open_connection(path, busy_timeout_ms=1000)
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
        assert sql(store, "PRAGMA user_version") == [(schema.LATEST,)]
