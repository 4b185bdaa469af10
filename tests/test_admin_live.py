"""Admin commands against a daemon that is serving: stats, gc, backup during writes, and a
kill -9 in the middle of a stream of adds."""

from __future__ import annotations

import json
import shutil
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import apsw
import trio

from memoryd.ids import DAY_MS as DAY
from memoryd.ids import now_ms
from memoryd.server.daemon import Daemon
from tests.admin_cli import memoryd, text
from tests.conftest import make_config
from tests.store_helpers import reading
from tests.wire import NdjsonPeer, listed_ids, sync_call, sync_listed_ids


async def run_cli(*args: str, data_dir: Path, env: dict[str, str] | None = None) -> Any:
    """The CLI as a process, without blocking the in-process daemon's event loop."""
    return await trio.to_thread.run_sync(partial(memoryd, *args, data_dir=data_dir, env=env))


class Writers:
    """Clients adding memories as fast as the daemon answers; ``acked`` holds every id that got
    a success reply."""

    def __init__(self, socket: Path, count: int = 2) -> None:
        self.socket = socket
        self.count = count
        self.acked: list[str] = []
        self.errors: list[Any] = []
        self._stop = trio.Event()
        self._progress = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for writer in range(self.count):
                nursery.start_soon(self._write, writer)
            task_status.started()

    async def _write(self, writer: int) -> None:
        peer = await NdjsonPeer.connect(self.socket)
        n = 0
        while not self._stop.is_set():
            reply = await peer.call(
                "memory.add", {"user_id": "alice", "content": f"writer {writer} memory {n} about tea"}, id=n
            )
            if "result" in reply:
                self.acked.append(reply["result"]["id"])
            else:
                self.errors.append(reply)
            self._progress.set()
            n += 1
        await peer.aclose()

    async def wait_for(self, count: int) -> None:
        while len(self.acked) < count:
            self._progress = trio.Event()
            await self._progress.wait()

    def stop(self) -> None:
        self._stop.set()


def all_ids(db_file: Path) -> set[str]:
    with reading(db_file) as db:
        return {row[0] for row in db.execute("SELECT id FROM memories")}


async def test_stats_and_gc_work_on_a_live_daemon_while_it_keeps_serving(daemon: Daemon, short_tmp: Path) -> None:
    config = daemon.config
    peer = await NdjsonPeer.connect(config.socket_path)
    ids = []
    for i in range(6):
        reply = await peer.call("memory.add", {"user_id": "alice", "content": f"fact number {i}"})
        ids.append(reply["result"]["id"])
    for memory_id in ids[:3]:
        assert (await peer.call("memory.delete", {"user_id": "alice", "memory_id": memory_id}))["result"]["deleted"]
    stats = await run_cli("stats", "--json", data_dir=config.data_path)
    assert stats.returncode == 0, text(stats)
    assert json.loads(stats.stdout)["memories"]["active"] == 3
    assert json.loads(stats.stdout)["memories"]["deleted"] == 3

    # Two of the deletions happened long ago (another process may write to the file any time).
    db = apsw.Connection(str(config.db_path))
    db.execute("UPDATE memories SET deleted_at_ms = ? WHERE id IN (?, ?)", (now_ms() - 40 * DAY, *ids[:2]))
    db.close()

    async with trio.open_nursery() as nursery:
        writers = Writers(config.socket_path)
        await nursery.start(writers.run)
        await writers.wait_for(10)
        gc = await run_cli("gc", "--json", data_dir=config.data_path)
        check = await run_cli("check", data_dir=config.data_path)
        await writers.wait_for(len(writers.acked) + 10)  # still adding after gc
        writers.stop()
    assert gc.returncode == 0, text(gc)
    assert json.loads(gc.stdout)["purged"] == 2
    assert check.returncode == 0, text(check)
    assert writers.errors == []
    assert all_ids(config.db_path) == set(ids[2:]) | set(writers.acked)
    hits = await peer.call("memory.search", {"user_id": "alice", "query": "fact number"})
    assert {h["id"] for h in hits["result"]} == set(ids[3:])
    await peer.aclose()


async def test_a_backup_taken_during_writes_restores_to_a_consistent_database(
    daemon: Daemon, short_tmp: Path, nursery: trio.Nursery
) -> None:
    config = daemon.config
    copy = short_tmp / "backup.db"
    async with trio.open_nursery() as writing:
        writers = Writers(config.socket_path, count=3)
        await writing.start(writers.run)
        await writers.wait_for(30)
        acked_before = set(writers.acked)
        done = await run_cli("backup", str(copy), data_dir=config.data_path)
        await writers.wait_for(len(writers.acked) + 10)
        writers.stop()
    assert done.returncode == 0, text(done)
    assert writers.errors == []
    in_backup = all_ids(copy)
    # A snapshot from some moment during the command: everything acknowledged before it, and
    # nothing that was never acknowledged.
    assert acked_before <= in_backup <= set(writers.acked)

    restored = make_config(short_tmp / "r")
    restored.data_path.mkdir(parents=True)
    shutil.copy(copy, restored.db_path)
    check = await run_cli("check", data_dir=restored.data_path)
    assert check.returncode == 0, text(check)
    second = Daemon(restored)
    await nursery.start(second.run)
    peer = await NdjsonPeer.connect(restored.socket_path)
    # Paged: adds are fast enough now that the backup may hold more than one page of 1000.
    assert await listed_ids(peer, "alice") == in_backup
    hits = await peer.call("memory.search", {"user_id": "alice", "query": "tea", "limit": 5})
    assert len(hits["result"]) == 5
    await peer.aclose()
    second.request_stop()


def test_kill_9_during_adds_loses_no_acknowledged_memory(daemon_process: Any, short_tmp: Path) -> None:
    # The real embedder, so the crash also hits embed jobs and vector writes.
    process = daemon_process("--embedder", "local").start(timeout=60)
    acked: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def write(writer: int) -> None:
        n = 0
        while not stop.is_set():
            try:
                reply = sync_call(process.socket, "memory.add", {"user_id": "alice", "content": f"w{writer} fact {n}"})
            except (OSError, ValueError):
                return  # the daemon is gone (refused, reset, or closed before a reply)
            if "result" not in reply:
                return
            with lock:
                acked.append(reply["result"]["id"])
            n += 1

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while len(acked) < 120 and time.monotonic() < deadline:
        time.sleep(0.01)
    process.proc.kill()  # SIGKILL, mid-stream
    process.proc.wait(30)
    stop.set()
    for thread in threads:
        thread.join(30)
    assert len(acked) >= 120

    restarted = daemon_process("--embedder", "local").start(timeout=60)
    assert set(acked) <= sync_listed_ids(restarted.socket, "alice")
    check = memoryd("check", data_dir=short_tmp / "data")
    assert check.returncode == 0, text(check)
    assert sync_call(restarted.socket, "system.health")["result"]["status"] in ("ok", "degraded")
