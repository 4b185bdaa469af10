"""Another connection holding SQLite's write lock: whoever opens or writes meanwhile waits for it
(up to its busy timeout), and a write that still finds it held fails retryably, never as an
internal error, and never stops the daemon."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest
import trio

from memoryd.errors import StoreBusy
from memoryd.server import pausing
from memoryd.server.daemon import Daemon
from memoryd.service.backfill import PROBE_TEXT
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.db.database import open_connection
from tests.conftest import make_config
from tests.fake_backends import FakeBackend, Reply
from tests.store_helpers import note, sql
from tests.wire import NdjsonPeer, call_ok

#: Far longer than the 100 ms apsw's best practice gives a new connection.
HELD_SECONDS = 0.6


@contextmanager
def write_lock_held(path: Path) -> Iterator[apsw.Connection]:
    """Another connection (as another process would) holding the write lock until the block ends."""
    other = open_connection(path, busy_timeout_ms=30_000)
    try:
        other.execute("BEGIN IMMEDIATE")
        try:
            yield other
        finally:
            other.execute("ROLLBACK")
    finally:
        other.close()


@contextmanager
def released_after(other: apsw.Connection, seconds: float) -> Iterator[None]:
    """Let ``other`` (holding the write lock) go after ``seconds``, from a thread."""

    def release() -> None:
        time.sleep(seconds)
        other.execute("ROLLBACK")

    thread = threading.Thread(target=release)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def test_a_connection_opens_while_another_holds_the_write_lock_and_its_writes_wait(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    Store(path).close()
    other = open_connection(path, busy_timeout_ms=30_000)
    try:
        other.execute("BEGIN IMMEDIATE")
        # Opening needs no write lock (apsw's best-practice PRAGMA optimize may write statistics,
        # and is skipped while another connection writes): it must not fail after apsw's 100 ms.
        db = open_connection(path, busy_timeout_ms=30_000)
        try:
            started = time.monotonic()
            with released_after(other, HELD_SECONDS), db:
                # Its own writes wait for the lock as long as its busy timeout says.
                db.execute("INSERT INTO meta(key, value) VALUES ('probe', 'x')")
            assert time.monotonic() - started >= HELD_SECONDS
        finally:
            db.close()
    finally:
        other.close()
    assert sql(path, "SELECT value FROM meta WHERE key = 'probe'") == [("x",)]


def test_a_store_opens_while_another_process_writes_and_its_adds_wait(tmp_path: Path) -> None:
    # `memoryd import`, `gc` and the daemon itself open the store while another process may be
    # in the middle of a write.
    path = tmp_path / "m.db"
    Store(path).close()
    other = open_connection(path, busy_timeout_ms=30_000)
    try:
        other.execute("BEGIN IMMEDIATE")
        with Store(path, busy_timeout_ms=30_000) as store, released_after(other, HELD_SECONDS):
            trio.run(store.memories.add, note("written once the other process let go"))
    finally:
        other.close()
    assert sql(path, "SELECT content FROM memories") == [("written once the other process let go",)]


def test_every_way_of_writing_turns_a_lock_held_too_long_into_store_busy(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Store(path, busy_timeout_ms=100) as store, write_lock_held(path):
        # The synchronous paths too: the maintenance pass and an erasure's free-space wipe run
        # them in a worker thread, and a bare apsw.BusyError would reach a client as -32603.
        with pytest.raises(StoreBusy):
            store.maintenance.optimize(max_steps=1)
        with pytest.raises(StoreBusy):
            store.jobs.enqueue_missing_embeddings()
        with pytest.raises(StoreBusy):
            store.memories.add_many([note("refused while locked")])
        with pytest.raises(StoreBusy):
            trio.run(store.memories.add, note("refused while locked"))


async def test_the_embedding_backfill_waits_out_a_lock_held_past_its_busy_timeout(
    short_tmp: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="memoryd.daemon")
    monkeypatch.setattr(pausing, "STORAGE_RETRY_SECONDS", 0.3)
    gate = threading.Event()

    def held(request: dict[str, Any]) -> Reply:
        if request["input"] != [PROBE_TEXT]:
            gate.wait(60)
        return Reply()

    with FakeBackend("openai") as backend:
        backend.script.extend([held] * 50)
        embed = {"url": backend.url, "model": "fake-embed", "retries": 0, "add_wait": 0.0}
        daemon = Daemon(make_config(short_tmp, embedder="openai", embed=embed, storage={"busy_timeout_ms": 200}))
        async with trio.open_nursery() as nursery:
            with trio.fail_after(60):
                await nursery.start(daemon.run)
                peer = await NdjsonPeer.connect(daemon.config.socket_path)
                for i in range(3):
                    await call_ok(peer, "memory.add", {"user_id": "alice", "content": f"small note {i}"})
                while not any(seen.body["input"] != [PROBE_TEXT] for seen in backend.seen):
                    await trio.sleep(0.02)  # the backfill holds the jobs, waiting for their vectors
                with write_lock_held(daemon.config.db_path):
                    gate.set()  # its write comes now, and finds the lock held past 200 ms
                    while "worker.paused" not in caplog.text:
                        await trio.sleep(0.05)
                # It tries again after its pause, and the memories get their vectors.
                while (await call_ok(peer, "system.health", {}))["backlog"].get("embed", 0):
                    await trio.sleep(0.05)
                search = await call_ok(peer, "memory.search", {"user_id": "alice", "query": "note", "min_relevance": 0})
                assert len(search) == 3, search
                await peer.aclose()
                daemon.request_stop()
