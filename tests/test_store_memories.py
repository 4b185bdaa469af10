"""Store: adding, dedupe, listing, expiry, soft-delete audit, persistence."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from memoryd.errors import BrokenInvariant, StoreError
from memoryd.ids import now_ms
from memoryd.store import MemoryRecord, NewMemory, Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.memories import memories
from memoryd.store.sqlite.schema import ladder as schema
from tests.store_helpers import note, sql


def personal(content: str, owner: str = "alice", **kw: object) -> NewMemory:
    return note(content, owner, source="test", **kw)


def group(content: str, chat_id: str, owner: str = "alice") -> NewMemory:
    return note(content, owner, chat_id=chat_id, shared=True, source="test")


def events_of(path: Path, memory_id: str) -> list[tuple[str, str]]:
    return sql(path, "SELECT event, actor FROM events WHERE memory_id = ? ORDER BY event_id", (memory_id,))


async def test_add_returns_the_wire_record(store: Store) -> None:
    record, duplicate = await store.memories.add(
        NewMemory(
            content="Allergic to peanuts",
            owner="alice",
            chat_id="chat-1",
            shared=False,
            source="chat",
            subjects=["health"],
            expires_at_ms=None,
            metadata={"k": [1, 2]},
            confidence=0.75,
        )
    )
    assert duplicate is False
    assert len(record.id) == 26
    assert record.content == "Allergic to peanuts"
    assert (record.scope, record.owner, record.chat_id) == ("personal", "alice", "chat-1")
    assert record.subjects == ["health"] and record.metadata == {"k": [1, 2]}
    assert record.confidence == 0.75 and record.expires_at is None
    assert record.created_at.endswith("Z") and "T" in record.created_at


async def test_identical_content_in_the_same_scope_returns_the_existing_memory(store: Store) -> None:
    first, _ = await store.memories.add(personal("Likes green tea"))
    again, duplicate = await store.memories.add(personal("  Likes   green tea "))
    assert duplicate is True and again.id == first.id
    assert len(await store.memories.list(Scope("alice"), limit=10)) == 1


async def test_identical_content_in_other_scopes_is_not_a_duplicate(store: Store) -> None:
    mine, _ = await store.memories.add(personal("Likes green tea"))
    theirs, dup1 = await store.memories.add(personal("Likes green tea", owner="bob"))
    shared, dup2 = await store.memories.add(group("Likes green tea", "chat-1"))
    assert not dup1 and not dup2
    assert len({mine.id, theirs.id, shared.id}) == 3


async def test_a_deleted_or_expired_memory_does_not_swallow_a_new_one(store: Store) -> None:
    old, _ = await store.memories.add(personal("Lives in Porto"))
    await store.memories.delete(Scope("alice"), old.id)
    again, duplicate = await store.memories.add(personal("Lives in Porto"))
    assert not duplicate and again.id != old.id

    expired, _ = await store.memories.add(personal("Parks on level 3", expires_at_ms=now_ms() - 1))
    fresh, duplicate = await store.memories.add(personal("Parks on level 3"))
    assert not duplicate and fresh.id != expired.id


async def test_a_shared_memory_without_a_chat_breaks_an_invariant(store: Store) -> None:
    # Callers are validated in the service (InvalidParams); reaching the store with it is a bug.
    with pytest.raises(BrokenInvariant):
        await store.memories.add(NewMemory(content="x", owner="alice", chat_id=None, shared=True, source="t"))
    assert await store.memories.list(Scope("alice", "c"), limit=5) == []


def test_a_scope_without_a_user_breaks_an_invariant() -> None:
    with pytest.raises(BrokenInvariant):
        Scope("")


async def test_list_is_newest_first_with_offset_and_cursor(store: Store) -> None:
    added = [(await store.memories.add(personal(f"memory number {i}")))[0] for i in range(7)]
    newest_first = [r.id for r in reversed(added)]
    scope = Scope("alice")

    assert [r.id for r in await store.memories.list(scope, limit=3)] == newest_first[:3]
    assert [r.id for r in await store.memories.list(scope, limit=3, offset=3)] == newest_first[3:6]
    page = await store.memories.list(scope, limit=3, before_id=newest_first[2])
    assert [r.id for r in page] == newest_first[3:6]
    assert await store.memories.list(scope, limit=3, before_id=newest_first[-1]) == []


async def test_list_merges_personal_and_group_memories_of_the_current_chat(store: Store) -> None:
    a, _ = await store.memories.add(personal("personal one"))
    b, _ = await store.memories.add(group("group one", "chat-1"))
    c, _ = await store.memories.add(personal("personal two"))
    await store.memories.add(group("other chat", "chat-2"))
    in_chat = await store.memories.list(Scope("alice", "chat-1"), limit=10)
    assert [r.id for r in in_chat] == [c.id, b.id, a.id]
    assert [r.scope for r in in_chat] == ["personal", "group", "personal"]
    assert [r.id for r in await store.memories.list(Scope("alice"), limit=10)] == [c.id, a.id]


async def test_expired_memories_are_hidden_unless_asked_for(store: Store) -> None:
    expired, _ = await store.memories.add(personal("old parking spot", expires_at_ms=now_ms() - 1000))
    future, _ = await store.memories.add(personal("new parking spot", expires_at_ms=now_ms() + 3_600_000))
    scope = Scope("alice")
    assert [r.id for r in await store.memories.list(scope, limit=10)] == [future.id]
    assert {r.id for r in await store.memories.list(scope, limit=10, include_expired=True)} == {expired.id, future.id}
    assert [h.id for h in await store.memories.search(scope, "parking spot", limit=10)] == [future.id]
    assert future.expires_at is not None and future.expires_at.endswith("Z")


async def test_soft_delete_hides_the_memory_and_keeps_an_audit_trail(store: Store, tmp_path: Path) -> None:
    record, _ = await store.memories.add(personal("secret plan"))
    assert await store.memories.delete(Scope("alice"), record.id) == record.id
    assert await store.memories.list(Scope("alice"), limit=10, include_expired=True) == []
    assert await store.memories.search(Scope("alice"), "secret plan", limit=10) == []
    assert await store.memories.delete(Scope("alice"), record.id) is None
    counts = await store.memories.health_counts()
    assert counts["memories_deleted"] == 1 and counts["memories_active"] == 0
    store.close()
    assert events_of(tmp_path / "memory.db", record.id) == [("added", "alice"), ("deleted", "alice")]
    db = apsw.Connection(str(tmp_path / "memory.db"))
    try:  # kept for audit, not purged
        row = db.execute("SELECT deleted_at_ms IS NOT NULL FROM memories WHERE id = ?", (record.id,)).fetchone()
        assert row == (1,)
        details = [d for (d,) in db.execute("SELECT detail FROM events")]
        assert all("secret" not in d for d in details)
        db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")  # raises if corrupt
    finally:
        db.close()


async def test_memories_survive_reopening_the_store(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Store(path) as first:
        record, _ = await first.memories.add(personal("remember the milk"))
        first.lifecycle.checkpoint()
    with Store(path) as second:
        assert [r.id for r in await second.memories.list(Scope("alice"), limit=10)] == [record.id]
        assert [h.id for h in await second.memories.search(Scope("alice"), "milk", limit=5)] == [record.id]
        again, duplicate = await second.memories.add(personal("remember the milk"))
        assert duplicate and again.id == record.id


def test_migrations_bring_a_new_file_to_the_newest_version(tmp_path: Path) -> None:
    with Store(tmp_path / "memory.db"):
        pass
    db = apsw.Connection(str(tmp_path / "memory.db"))
    try:
        assert schema.schema_version(db) == schema.LATEST
        assert db.pragma("journal_mode") == "wal"
    finally:
        db.close()


def test_a_database_from_a_newer_memoryd_is_refused(tmp_path: Path) -> None:
    db = apsw.Connection(str(tmp_path / "memory.db"))
    db.pragma("user_version", schema.LATEST + 1)
    db.close()
    with pytest.raises(StoreError, match="newer"):
        Store(tmp_path / "memory.db")


async def test_health_counts_memories_users_and_bytes(store: Store) -> None:
    await store.memories.add(personal("a"))
    await store.memories.add(personal("b", owner="bob"))
    await store.memories.add(personal("c", expires_at_ms=now_ms() - 1))
    counts = await store.memories.health_counts()
    assert counts["memories_active"] == 2
    assert counts["memories_expired"] == 1
    assert counts["memories_deleted"] == 0
    assert counts["users"] == 2
    assert counts["db_bytes"] > 0


async def test_a_closed_store_refuses_work(tmp_path: Path) -> None:
    store = Store(tmp_path / "memory.db")
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError):
        await store.memories.list(Scope("alice"), limit=1)
    with pytest.raises(StoreError):
        await store.memories.add(personal("x"))


async def test_concurrent_writes_and_reads_do_not_interfere(store: Store) -> None:
    import trio

    found: list[int] = []

    async def reader() -> None:
        for _ in range(10):
            found.append(len(await store.memories.search(Scope("alice"), "parallel", limit=100)))

    async with trio.open_nursery() as nursery:
        for i in range(30):
            nursery.start_soon(store.memories.add, personal(f"parallel note {i}"))
        for _ in range(4):
            nursery.start_soon(reader)
    assert len(await store.memories.list(Scope("alice"), limit=100)) == 30
    assert all(0 <= n <= 30 for n in found)


def test_content_hash_ignores_whitespace_but_not_case() -> None:
    assert memories.content_hash("a  b\n") == memories.content_hash("a b")
    assert memories.content_hash("A b") != memories.content_hash("a b")


def test_records_are_msgspec_structs() -> None:
    import msgspec

    record = MemoryRecord(
        id="X",
        content="c",
        source="s",
        subjects=[],
        scope="personal",
        owner="o",
        chat_id=None,
        created_at="t",
        expires_at=None,
        metadata={},
        confidence=1.0,
    )
    assert msgspec.json.decode(msgspec.json.encode(record))["scope"] == "personal"
