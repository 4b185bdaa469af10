"""A full disk and a damaged file while serving: real faults (tmpfs, overwritten bytes), a daemon
in this process, calls over its real socket."""

from __future__ import annotations

import logging
import random
import string
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd import errors
from memoryd.errors import StoreRefused
from memoryd.server import pausing
from memoryd.server.daemon import Daemon
from memoryd.service.backfill import PROBE_TEXT
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.db.database import open_connection
from memoryd.store.visibility import Scope
from tests.conftest import make_config
from tests.disk_faults import build_store, corrupt_mid_file, fill, tmpfs
from tests.fake_backends import FakeBackend, Reply
from tests.store_helpers import note, sql
from tests.wire import NdjsonPeer

STORAGE_FULL = -32009
UNAVAILABLE = -32007


def _bulky(i: int) -> str:
    # Incompressible text: every add needs new pages.
    rng = random.Random(i)
    return f"note {i} " + "".join(rng.choice(string.ascii_letters + " ") for _ in range(12_000))


async def _add(peer: NdjsonPeer, content: str) -> dict:
    return await peer.call("memory.add", {"user_id": "alice", "content": content})


async def _truncate_wal(path: Path) -> None:
    """Fold the WAL back and empty it, once the daemon's own writes let it (they finish soon)."""
    db = open_connection(path, busy_timeout_ms=5000)
    try:
        with trio.fail_after(30):
            while db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] != 0:
                await trio.sleep(0.05)
    finally:
        db.close()


async def _add_until_refused(peer: NdjsonPeer, attempts: int = 100) -> dict:
    """Bulky adds until one is answered with an error; that reply."""
    for i in range(attempts):
        reply = await _add(peer, _bulky(i))
        if "error" in reply:
            return reply
    raise AssertionError(f"{attempts} bulky adds on a full disk all succeeded")


async def test_a_full_disk_answers_storage_full_turns_health_degraded_and_recovers(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memoryd")
    with tmpfs("4m") as disk:
        daemon = Daemon(make_config(short_tmp, data_dir=str(disk / "data")))
        async with trio.open_nursery() as nursery:
            with trio.fail_after(60):
                path = await nursery.start(daemon.run)
                peer = await NdjsonPeer.connect(path)
                kept = [(await _add(peer, f"small note {i}"))["result"]["id"] for i in range(40)]
                filler = fill(disk)
                # The WAL's already allocated space may take a few more adds: add until it says no.
                reply = await _add_until_refused(peer)
                assert reply["error"]["code"] == STORAGE_FULL, reply
                assert reply["error"]["data"] == {"retryable": True}
                again = await _add(peer, _bulky(1000))
                assert again["error"]["code"] == STORAGE_FULL
                # Small deletes fit in the WAL space the failed adds left allocated, until it is used up.
                for memory_id in kept:
                    deleted = await peer.call("memory.delete", {"user_id": "alice", "memory_id": memory_id})
                    if "error" in deleted:
                        break
                assert deleted["error"]["code"] == STORAGE_FULL, deleted

                health = (await peer.call("system.health", {}))["result"]
                assert health["status"] == "degraded"
                assert "disk is full" in health["reason"]
                assert health["storage"]["state"] == "full"
                # Reads still work on a full disk.
                listed = await peer.call("memory.list", {"user_id": "alice", "limit": 100})
                assert kept[0] in [m["id"] for m in listed["result"]]

                filler.unlink()
                # Health sees the space come back by itself, before any write succeeds.
                health = (await peer.call("system.health", {}))["result"]
                assert health["status"] == "ok" and "reason" not in health
                assert "result" in await _add(peer, _bulky(2000))
                await peer.aclose()
                daemon.request_stop()
    # Once per state change, no traceback per call.
    assert caplog.text.count("store.full") == 1
    assert caplog.text.count("store.space_returned") == 1
    assert "Traceback" not in caplog.text


async def test_a_store_damaged_while_serving_turns_health_degraded_and_stops_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db_path = tmp_path / "memoryd.db"
    build_store(db_path)
    corrupt_mid_file(db_path)
    # Opened without the start-up check, as a daemon would be that found nothing yet.
    with Store(db_path, readers=1) as store:
        scope = Scope("alice")
        failures = 0
        for query in ("alpha", "beta gamma", "memory", "kappa sigma"):
            try:
                await store.memories.list(scope, limit=10_000)
                await store.memories.search(scope, query, limit=50)
            except errors.StoreCorrupt:
                failures += 1
        assert failures, "the overwritten pages were never read"
        assert store.memories.storage.state == "corrupt"
        assert "memoryd check" in store.memories.storage.reason
        files_before = _file_states(db_path)
        with pytest.raises(errors.StoreCorrupt):
            await store.memories.add(note("written into a damaged file?"))
        assert _file_states(db_path) == files_before  # refused before SQLite wrote anything
        assert caplog.text.count("store.corrupt") == 1


def _file_states(db_path: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of the database file and its WAL (the files a write would change)."""
    files = [db_path, Path(f"{db_path}-wal")]
    return {path.name: (path.stat().st_size, path.stat().st_mtime_ns) for path in files if path.exists()}


async def test_damage_found_after_ready_is_answered_unavailable_and_shown_in_health(short_tmp: Path) -> None:
    data = short_tmp / "data"
    build_store(data / "memoryd.db")
    corrupt_mid_file(data / "memoryd.db")
    # Waiting 0 s for the check: the daemon serves while it runs, as with a large store.
    daemon = Daemon(make_config(short_tmp, storage={"integrity_check_wait": 0.0}))
    async with trio.open_nursery() as nursery:
        with trio.fail_after(60):
            try:
                path = await nursery.start(daemon.run)
            except StoreRefused as refused:
                # Opening the file read the damaged pages before the check did (the connection's
                # start-up optimize may): refused before serving, which is as safe.
                assert "memoryd check" in str(refused)
                return
            peer = await NdjsonPeer.connect(path)
            while (health := (await peer.call("system.health", {}))["result"])["status"] == "ok":
                await trio.sleep(0.01)
            assert health["storage"]["state"] == "corrupt"
            assert "memoryd check" in health["reason"]
            refused = await _add(peer, "must not be written into a damaged file")
            assert refused["error"]["code"] == UNAVAILABLE
            assert refused["error"]["data"] == {"storage": "corrupt"}
            await peer.aclose()
            daemon.request_stop()


async def test_an_add_that_embeds_its_own_vector_answers_storage_full_on_a_full_disk(short_tmp: Path) -> None:
    # On an idle embedder the add embeds beside its insert (a nursery): the insert's DiskFull
    # must still reach the caller as storage full, not as an internal error.  The daemon loads
    # a model of its own: the refused add leaves its embedding to finish in a thread after this
    # test's trio run, holding the shared session model's limiter token, which would stall the
    # next test that embeds with it.
    with tmpfs("4m") as disk:
        daemon = Daemon(make_config(short_tmp, data_dir=str(disk / "data"), embedder="local"))
        async with trio.open_nursery() as nursery:
            with trio.fail_after(120):
                path = await nursery.start(daemon.run)
                peer = await NdjsonPeer.connect(path)
                first = (await _add(peer, "a first note"))["result"]
                assert first["embedded"] is True  # the path under test: the add embedded itself
                filler = fill(disk)
                reply = await _add_until_refused(peer)
                assert reply["error"]["code"] == STORAGE_FULL, reply
                filler.unlink()
                await peer.aclose()
                daemon.request_stop()


@dataclass
class Gated:
    """A daemon on a small tmpfs whose embedding backend holds every request but the start-up
    probe until ``gate`` is set."""

    disk: Path
    backend: FakeBackend
    gate: threading.Event
    path: Path
    peer: NdjsonPeer

    async def embedding_requested(self) -> None:
        while not any(seen.body["input"] != [PROBE_TEXT] for seen in self.backend.seen):
            await trio.sleep(0.02)

    async def fill_to_the_last_page(self) -> Path:
        """An empty WAL on a disk without one free block: no write fits anywhere (a WAL folded
        back but kept at its size would take a few more pages, and whose write fits is timing)."""
        await _truncate_wal(self.disk / "data" / "memoryd.db")
        return fill(self.disk)


@asynccontextmanager
async def gated_daemon(base: Path, add_wait: float) -> AsyncIterator[Gated]:
    gate = threading.Event()

    def held(request: dict[str, Any]) -> Reply:
        if request["input"] != [PROBE_TEXT]:
            gate.wait(60)
        return Reply()

    with tmpfs("16m") as disk, FakeBackend("openai") as backend:
        backend.dim = 384
        backend.script.extend([held] * 50)
        embed = {"url": backend.url, "model": "fake-embed", "timeout": 90.0, "retries": 0, "add_wait": add_wait}
        daemon = Daemon(make_config(base, data_dir=str(disk / "data"), embedder="openai", embed=embed))
        async with trio.open_nursery() as nursery:
            with trio.fail_after(120):
                path = await nursery.start(daemon.run)
                peer = await NdjsonPeer.connect(path)
                try:
                    yield Gated(disk, backend, gate, path, peer)
                finally:
                    gate.set()
                    await peer.aclose()
                    daemon.request_stop()


async def _health(peer: NdjsonPeer) -> dict[str, Any]:
    result: dict[str, Any] = (await peer.call("system.health", {}))["result"]
    return result


async def test_the_embedding_backfill_pauses_on_a_full_disk_instead_of_stopping_the_daemon(
    short_tmp: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="memoryd.daemon")
    # A shorter pause than the daemon's 5 s: the test waits for the retry after it.
    monkeypatch.setattr(pausing, "STORAGE_RETRY_SECONDS", 0.5)
    async with gated_daemon(short_tmp, add_wait=0.0) as gated:
        peer = gated.peer
        added = [await _add(peer, f"small note {i}") for i in range(5)]
        assert all("result" in reply for reply in added), added
        await gated.embedding_requested()  # the backfill holds the jobs
        filler = await gated.fill_to_the_last_page()
        gated.gate.set()
        while (await _health(peer))["storage"]["state"] != "full":
            await trio.sleep(0.05)
        while "worker.paused" not in caplog.text:  # the backfill hit the full disk, and lives
            await trio.sleep(0.05)
        filler.unlink()
        # It tries again after its pause, and the memories get their vectors.
        while (await _health(peer))["backlog"].get("embed", 0):
            await trio.sleep(0.1)
        assert (await _health(peer))["storage"]["state"] == "ok"
        # The fake backend's vectors are hash noise: their relevance means nothing, no threshold.
        search = await peer.call("memory.search", {"user_id": "alice", "query": "small note", "min_relevance": 0})
        assert len(search["result"]) == 5, search


async def test_an_add_whose_vector_a_full_disk_refuses_is_stored_and_says_so(short_tmp: Path) -> None:
    # The insert fits and commits; the vector, written after the embedding, does not. The add
    # did store the memory, so it answers success (embedded: false), and the job stays queued.
    async with gated_daemon(short_tmp, add_wait=60.0) as gated:
        watcher = await NdjsonPeer.connect(gated.path)
        while not (await _health(watcher))["embedder"]["vector_space_ready"]:
            await trio.sleep(0.02)  # until then an add leaves its text to the backfill
        replies: list[dict[str, Any]] = []

        async def add() -> None:
            replies.append(await _add(gated.peer, "allergic to peanuts"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(add)
            await gated.embedding_requested()
            while (await _health(watcher))["counts"]["memories_active"] == 0:
                await trio.sleep(0.02)
            filler = await gated.fill_to_the_last_page()
            gated.gate.set()
        assert replies[0]["result"]["embedded"] is False, replies
        health = await _health(watcher)
        assert health["embedder"]["adds_left_to_backfill"] == 0  # it did try its own
        assert health["storage"]["state"] == "full"
        assert health["backlog"]["embed"] == 1
        filler.unlink()
        found = await watcher.call("memory.search", {"user_id": "alice", "query": "peanuts"})
        assert [hit["id"] for hit in found["result"]] == [replies[0]["result"]["id"]]
        await watcher.aclose()


@pytest.mark.parametrize(
    ("column", "damage"),
    [("content", "CAST(x'e5e5e5' AS TEXT)"), ("subjects", "'[\"unterminated'"), ("metadata", "'{not json'")],
)
async def test_a_row_that_no_longer_decodes_counts_as_corruption(tmp_path: Path, column: str, damage: str) -> None:
    # Damage that SQLite's page checks miss (bytes inside a cell): memoryd wrote valid UTF-8 and
    # JSON, so a row that does not decode is a damaged file, not an internal error.
    db_path = tmp_path / "memoryd.db"
    with Store(db_path, readers=1) as store:
        await store.memories.add(note("a memory that will be damaged"))
    sql(db_path, f"UPDATE memories SET {column} = {damage}")
    with Store(db_path, readers=1) as store:
        with pytest.raises(errors.StoreCorrupt):
            await store.memories.list(Scope("alice"), limit=10)
        assert store.memories.storage.state == "corrupt"
        with pytest.raises(errors.StoreCorrupt):
            await store.memories.add(note("written into a damaged file?"))
