"""The daemon's maintenance task: start-up pass, max_entries, expiry, interval, access flushing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import trio

from memoryd.config import Config
from memoryd.ids import DAY_MS as DAY
from memoryd.ids import now_ms
from memoryd.server.daemon import Daemon
from memoryd.store.sqlite import Store
from tests.admin_cli import memoryd
from tests.conftest import make_config
from tests.store_helpers import Clock, note, sql
from tests.wire import NdjsonPeer


def lifecycle_config(base: Path, **settings: Any) -> Config:
    config = make_config(base)
    return msgspec.structs.replace(config, lifecycle=msgspec.structs.replace(config.lifecycle, **settings))


def query(config: Config, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return sql(config.db_path, statement, params)


def seed_old_memories(config: Config, count: int, owner: str = "alice") -> list[str]:
    """Memories added 30 days ago (past protect_recent_days), oldest first."""
    config.data_path.mkdir(parents=True)
    clock = Clock()
    with Store(config.db_path, readers=1, clock=clock) as store:
        for i in range(count):
            clock.at = now_ms() - 30 * DAY + i
            store.memories.add_many([note(f"old memory {i}", owner, source="agent")])
    return [row[0] for row in query(config, "SELECT id FROM memories ORDER BY created_at_ms")]


async def test_the_start_up_pass_enforces_max_entries_per_user(short_tmp: Path) -> None:
    config = lifecycle_config(short_tmp, max_entries_per_user=3)
    ids = seed_old_memories(config, 5)
    daemon = Daemon(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run)
        assert daemon.maintenance is not None
        with trio.fail_after(20):
            summary = await daemon.maintenance.wait_for_runs(1)
        assert summary is not None and summary["evicted"] == 2
        peer = await NdjsonPeer.connect(config.socket_path)
        listed = await peer.call("memory.list", {"user_id": "alice", "limit": 10})
        assert [m["id"] for m in listed["result"]] == list(reversed(ids[2:]))
        await peer.aclose()
        daemon.request_stop()
    evicted = query(config, "SELECT memory_id, actor FROM events WHERE event = 'evicted' ORDER BY event_id")
    assert evicted == [(ids[0], "memoryd"), (ids[1], "memoryd")]
    stats = memoryd("stats", "--json", data_dir=config.data_path)
    assert json.loads(stats.stdout)["last_maintenance"]["evicted"] == 2


async def test_a_pass_audits_each_expiry_once(short_tmp: Path) -> None:
    config = lifecycle_config(short_tmp)
    daemon = Daemon(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run)
        assert daemon.maintenance is not None
        peer = await NdjsonPeer.connect(config.socket_path)
        added = await peer.call("memory.add", {"user_id": "alice", "content": "brief", "expires_days": 1})
        memory_id = added["result"]["id"]
        with trio.fail_after(20):
            await daemon.maintenance.wait_for_runs(1)
            # Time passes (another process may write to the database file at any time).
            query(config, "UPDATE memories SET expires_at_ms = ? WHERE id = ?", (now_ms() - 1, memory_id))
            for runs in (2, 3):
                daemon.maintenance.run_now()
                await daemon.maintenance.wait_for_runs(runs)
        assert query(config, "SELECT memory_id FROM events WHERE event = 'expired'") == [(memory_id,)]
        hidden = await peer.call("memory.list", {"user_id": "alice"})
        shown = await peer.call("memory.list", {"user_id": "alice", "include_expired": True})
        assert hidden["result"] == [] and [m["id"] for m in shown["result"]] == [memory_id]
        await peer.aclose()
        daemon.request_stop()


async def test_passes_repeat_at_the_configured_interval(short_tmp: Path) -> None:
    config = lifecycle_config(short_tmp, maintenance_interval=0.05)
    daemon = Daemon(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run)
        assert daemon.maintenance is not None
        with trio.fail_after(20):
            await daemon.maintenance.wait_for_runs(3)
        daemon.request_stop()


async def test_search_and_list_hits_are_written_by_the_daemon(short_tmp: Path) -> None:
    config = lifecycle_config(short_tmp)
    daemon = Daemon(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run)
        peer = await NdjsonPeer.connect(config.socket_path)
        tea = (await peer.call("memory.add", {"user_id": "alice", "content": "likes oolong tea"}))["result"]["id"]
        chess = (await peer.call("memory.add", {"user_id": "alice", "content": "plays chess"}))["result"]["id"]
        for _ in range(3):
            hits = await peer.call("memory.search", {"user_id": "alice", "query": "oolong tea"})
            assert [h["id"] for h in hits["result"]] == [tea]
        await peer.call("memory.list", {"user_id": "alice"})
        await peer.aclose()
        daemon.request_stop()
    # Flushed on the way out at the latest (every few seconds while running).
    counts = dict(query(config, "SELECT id, access_count FROM memories"))
    assert counts == {tea: 4, chess: 1}
    assert all(row[0] is not None for row in query(config, "SELECT last_access_ms FROM memories"))
