"""memory.add and its vector: embedded before the reply when the embedder is idle; when it is
busy, acknowledged with ``embedded: false`` and embedded by the backfill shortly after; and the
job of an acknowledged add survives the daemon being killed before its vector is written."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.ids import now_ms
from memoryd.server.daemon import Daemon
from memoryd.store.sqlite.jobs.jobs import OWN_LEASE_MS
from memoryd.store.sqlite.vectors import vector_codec
from tests.conftest import make_config
from tests.fake_backends import DIM, FakeBackend, Reply, unit, vector_for
from tests.store_helpers import sql
from tests.wire import NdjsonPeer, call_ok

ALICE = {"user_id": "alice"}
#: Generous bounds: correctness, not speed (the machine may be busy with other test suites).
PATIENCE = 60.0


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    with FakeBackend("openai") as fake:
        yield fake


class Gate:
    """Backend replies that wait until the test opens the gate (the embedder is then busy)."""

    def __init__(self, backend: FakeBackend) -> None:
        self.opened = threading.Event()
        self.backend = backend

    def hold_next(self) -> None:
        self.backend.script.append(lambda request: (self.opened.wait(PATIENCE), Reply())[1])


def vector_written(db: Path, memory_id: str) -> bool:
    [(generation,)] = sql(db, "SELECT vector_gen FROM memories WHERE id = ?", (memory_id,))
    return generation is not None


def embed_jobs(db: Path) -> dict[str, Any]:
    """memory id -> leased_until_ms of its embed job."""
    rows = sql(
        db,
        "SELECT m.id, j.leased_until_ms FROM jobs AS j JOIN memories AS m ON m.rowid = j.memory_rowid "
        "WHERE j.kind = 'embed'",
    )
    return dict(rows)


async def until_embedded(db: Path, memory_ids: list[str], patience: float = PATIENCE) -> None:
    with trio.fail_after(patience):
        while not all(vector_written(db, memory_id) for memory_id in memory_ids):
            await trio.sleep(0.05)


def openai_daemon(base: Path, backend: FakeBackend) -> Daemon:
    settings = {"url": backend.url, "model": "fake-embed", "timeout": PATIENCE, "retries": 0, "add_wait": PATIENCE}
    return Daemon(make_config(base, embedder="openai", embed=settings))


async def until(condition: Callable[[], bool]) -> None:
    with trio.fail_after(PATIENCE):
        while not condition():
            await trio.sleep(0.01)


async def ready_daemon(base: Path, backend: FakeBackend, nursery: trio.Nursery) -> tuple[Daemon, NdjsonPeer]:
    daemon = openai_daemon(base, backend)
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    with trio.fail_after(PATIENCE):
        while not (await call_ok(peer, "system.health", {}))["embedder"]["vector_space_ready"]:
            await trio.sleep(0.02)
        # ...and the backfill's first look at the job table is over.
        while (await call_ok(peer, "system.health", {}))["backlog"].get("embed", 0):
            await trio.sleep(0.02)
    return daemon, peer


async def test_a_lone_add_on_an_idle_embedder_has_its_vector_before_the_reply(
    short_tmp: Path, nursery: trio.Nursery, backend: FakeBackend
) -> None:
    daemon, peer = await ready_daemon(short_tmp, backend, nursery)
    calls = len(backend.seen)
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "allergic to peanuts"})
    assert added["embedded"] is True
    assert vector_written(daemon.config.db_path, added["id"])  # stored, not only computed
    assert embed_jobs(daemon.config.db_path) == {}
    # The add embedded its own text: one backend call, with just that text.
    assert [seen.body["input"] for seen in backend.seen[calls:]] == [["allergic to peanuts"]]
    embedder = (await call_ok(peer, "system.health", {}))["embedder"]
    assert (embedder["adds_embedded_at_once"], embedder["adds_left_to_backfill"]) == (1, 0)
    # A duplicate keeps the vector it has: no job, and the answer does not claim a new one.
    # (Its text may have been sent to the backend: the embedding starts before the insert
    # finds the duplicate, and is dropped.)
    again = await call_ok(peer, "memory.add", {**ALICE, "content": "allergic to peanuts"})
    assert again["deduplicated"] and again["id"] == added["id"] and again["embedded"] is False
    assert embed_jobs(daemon.config.db_path) == {} and vector_written(daemon.config.db_path, added["id"])
    daemon.request_stop()


async def test_an_add_while_the_embedder_is_busy_answers_at_once_and_its_vector_follows(
    short_tmp: Path, nursery: trio.Nursery, backend: FakeBackend
) -> None:
    daemon, peer = await ready_daemon(short_tmp, backend, nursery)
    gate = Gate(backend)
    gate.hold_next()  # the first add's own embedding
    gate.hold_next()  # the backfill's first call
    first: dict[str, Any] = {}

    async def first_add() -> None:
        client = await NdjsonPeer.connect(daemon.config.socket_path)
        first.update(await call_ok(client, "memory.add", {**ALICE, "content": "works as a nurse"}))

    calls = len(backend.seen)
    nursery.start_soon(first_add)
    with trio.fail_after(PATIENCE):
        while len(backend.seen) == calls:  # the first add's own embedding holds the backend
            await trio.sleep(0.01)
    busy = [await call_ok(peer, "memory.add", {**ALICE, "content": f"fact {n} while busy"}) for n in range(3)]
    assert [added["embedded"] for added in busy] == [False, False, False]
    db = daemon.config.db_path
    assert not any(vector_written(db, added["id"]) for added in busy)
    assert set(embed_jobs(db)) >= {added["id"] for added in busy}
    gate.opened.set()
    await until_embedded(db, [added["id"] for added in busy])
    with trio.fail_after(PATIENCE):
        while not first:
            await trio.sleep(0.01)
    assert first["embedded"] is True and vector_written(db, first["id"])
    # The first add's own text, then the three in at most two backfill calls (what was queued
    # when it looked: one, then the two that came while it embedded that one; or all three).
    assert sorted(len(seen.body["input"]) for seen in backend.seen[calls:]) in ([1, 3], [1, 1, 2])
    embedder = (await call_ok(peer, "system.health", {}))["embedder"]
    assert (embedder["adds_embedded_at_once"], embedder["adds_left_to_backfill"]) == (1, 3)
    daemon.request_stop()


async def test_an_add_during_the_backfills_start_up_keeps_its_job_and_is_embedded_once(
    short_tmp: Path, nursery: trio.Nursery, backend: FakeBackend
) -> None:
    """The leases a previous run left are freed before the first request, not when the backfill
    starts: an add answered while the backfill still waits for the embedder keeps the lease on
    its own job, so its text is embedded once, and every memory gets its vector (a job embedded
    twice once left the next memory, given the freed job id, without vector or job)."""
    async with trio.open_nursery() as first_run:  # the vector space exists from a previous run
        earlier, _ = await ready_daemon(short_tmp, backend, first_run)
        earlier.request_stop()
    db = earlier.config.db_path
    probe, own = Gate(backend), Gate(backend)
    probe.hold_next()  # the backfill's probe for the dimension: its start-up waits
    own.hold_next()  # the add's own embedding of its text
    calls = len(backend.seen)
    daemon = openai_daemon(short_tmp, backend)
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await until(lambda: len(backend.seen) == calls + 1)
    first: dict[str, Any] = {}

    async def first_add() -> None:
        client = await NdjsonPeer.connect(daemon.config.socket_path)
        first.update(await call_ok(client, "memory.add", {**ALICE, "content": "my wife is called Priya"}))

    nursery.start_soon(first_add)
    await until(lambda: any(leased is not None for leased in embed_jobs(db).values()))  # leased to the add
    probe.opened.set()
    await until(lambda: len(backend.seen) == calls + 2)  # the add's own call, held
    with trio.fail_after(PATIENCE):
        while not (await call_ok(peer, "system.health", {}))["embedder"]["vector_space_ready"]:
            await trio.sleep(0.02)
    # The backfill has looked at the job table: the add's job is still leased to the add.
    assert all(leased is not None and leased <= now_ms() + OWN_LEASE_MS for leased in embed_jobs(db).values())
    own.opened.set()
    await until(lambda: bool(first))
    later = await call_ok(peer, "memory.add", {**ALICE, "content": "we married in 2016"})
    await until_embedded(db, [first["id"], later["id"]])
    assert first["embedded"] is True and embed_jobs(db) == {}
    sent = [text for seen in backend.seen[calls + 1 :] for text in seen.body["input"]]
    assert sent.count("my wife is called Priya") == 1 and sent.count("we married in 2016") == 1
    assert (await call_ok(peer, "system.health", {}))["embedder"]["embedded_since_start"] == 2
    daemon.request_stop()


async def test_an_add_whose_own_embedding_fails_leaves_its_job_to_the_backfill(
    short_tmp: Path, nursery: trio.Nursery, backend: FakeBackend
) -> None:
    daemon, peer = await ready_daemon(short_tmp, backend, nursery)
    backend.script.append(Reply(status=400, body=b'{"error": "bad request"}'))
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "likes green tea"})
    assert added["embedded"] is False
    # The job was handed back (not leased for a minute): the backfill retries it with backoff.
    await until_embedded(daemon.config.db_path, [added["id"]])
    daemon.request_stop()


async def test_adds_acknowledged_before_their_vectors_are_embedded_after_a_kill(
    short_tmp: Path, daemon_process: Any, backend: FakeBackend
) -> None:
    """Acknowledged with embedded: false, then SIGKILL before any vector: nothing is lost, the
    restarted daemon embeds them all (the first add's lease on its own job is cleared too)."""
    env = {
        "MEMORYD_EMBED_URL": backend.url,
        "MEMORYD_EMBED_MODEL": "fake-embed",
        "MEMORYD_EMBED_RETRIES": "0",
        "MEMORYD_EMBED_TIMEOUT": str(PATIENCE),
        "MEMORYD_EMBED_ADD_WAIT": str(PATIENCE),
    }
    process = daemon_process("--embedder", "openai", env=env).start(timeout=PATIENCE)
    db = short_tmp / "data" / "memoryd.db"
    gate = Gate(backend)
    peer = await NdjsonPeer.connect(process.socket)
    with trio.fail_after(PATIENCE):
        while not (await call_ok(peer, "system.health", {}))["embedder"]["vector_space_ready"]:
            await trio.sleep(0.02)
    for _ in range(5):
        gate.hold_next()  # every embedding call of this run hangs until the kill
    calls = len(backend.seen)
    async with trio.open_nursery() as nursery:

        async def first_add() -> None:
            client = await NdjsonPeer.connect(process.socket)
            try:
                await client.call("memory.add", {**ALICE, "content": "lives in Lisbon"})
            except Exception:
                pass  # the daemon is killed while this add waits for its vector

        nursery.start_soon(first_add)
        with trio.fail_after(PATIENCE):
            while len(backend.seen) == calls:
                await trio.sleep(0.01)
        acked = [await call_ok(peer, "memory.add", {**ALICE, "content": f"acked fact {n}"}) for n in range(3)]
        assert [added["embedded"] for added in acked] == [False, False, False]
        process.stop(signal.SIGKILL)
    jobs = embed_jobs(db)
    assert len(jobs) == 4 and all(memory_id in jobs for memory_id in (a["id"] for a in acked))
    assert any(leased is not None for leased in jobs.values())  # the first add's own job
    memory_ids = [memory_id for (memory_id,) in sql(db, "SELECT id FROM memories")]
    assert not any(vector_written(db, memory_id) for memory_id in memory_ids)
    backend.script.clear()
    gate.opened.set()
    daemon_process("--embedder", "openai", env=env).start(timeout=PATIENCE)
    # Within half the own-embedding lease: start-up cleared it, it did not run out.
    await until_embedded(db, memory_ids, patience=OWN_LEASE_MS / 2000)
    assert embed_jobs(db) == {}


def stored_cosines(db: Path, memory_id: str, texts: list[str]) -> list[float]:
    """Cosine of the vector stored for ``memory_id`` with the fake backend's vector of each text."""
    [(fine,)] = sql(
        db, "SELECT c.fine FROM vector_copies AS c JOIN memories AS m ON m.rowid = c.memory_rowid WHERE m.id = ?",
        (memory_id,),
    )  # fmt: skip
    stored = vector_codec.unit_from_fine(fine, DIM)
    return [float(stored @ unit(vector_for(text))) for text in texts]


async def test_an_embedding_finishing_after_its_memory_was_erased_never_lands_on_another_users_memory(
    short_tmp: Path, nursery: trio.Nursery, backend: FakeBackend
) -> None:
    """Alice's add embeds its own text; before the embedder answers, she erases everything
    (memory.forget_all) and Bob adds a memory.  Bob's memory is the store's newest row again,
    and its job the newest job, just as Alice's were: the late answer for Alice's text must
    not become the vector of Bob's memory (a search of Bob's would then match Alice's words)."""
    daemon, peer = await ready_daemon(short_tmp, backend, nursery)
    db = daemon.config.db_path
    own, bobs = Gate(backend), Gate(backend)
    own.hold_next()  # Alice's add embedding its own text
    bobs.hold_next()  # the backfill embedding Bob's memory, after Alice's call (one call at a time)
    secret, tea = "my locker code is 7731", "Bob likes green tea"
    alices: dict[str, Any] = {}

    async def alice_adds() -> None:
        client = await NdjsonPeer.connect(daemon.config.socket_path)
        alices.update(await call_ok(client, "memory.add", {**ALICE, "content": secret}))

    calls = len(backend.seen)
    nursery.start_soon(alice_adds)
    await until(lambda: len(backend.seen) == calls + 1 and bool(embed_jobs(db)))  # stored, embedding held
    erased = await call_ok(peer, "memory.forget_all", {**ALICE, "confirm": True})
    assert erased["erased"]["memories"] == 1
    bob = await call_ok(peer, "memory.add", {"user_id": "bob", "content": tea})
    assert bob["embedded"] is False  # the embedder is busy with Alice's text: his add defers
    own.opened.set()
    await until(lambda: bool(alices))
    assert alices["embedded"] is False  # its memory is gone: nothing was stored for it
    await until(lambda: len(backend.seen) >= calls + 2)  # the backfill's call for Bob's memory, held
    bobs.opened.set()
    await until_embedded(db, [bob["id"]])
    mine, alice_words = stored_cosines(db, bob["id"], [tea, secret])
    assert mine > 0.95 and alice_words < 0.9
    # What Bob can observe: his memory does not match Alice's words (it would, at ~1.0).
    found = await call_ok(peer, "memory.search", {"user_id": "bob", "query": secret, "min_relevance": 0})
    assert [hit["similarity"] < 0.9 for hit in found if hit["id"] == bob["id"]] in ([], [True])
    daemon.request_stop()
