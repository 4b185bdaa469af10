"""Pinning and max_entries through the socket: the cap holds at every add, the weakest memory
goes first (never a pinned one), and `memoryd gc` enforces the cap too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from memoryd.server.daemon import Daemon
from tests.admin_cli import export_lines, memoryd, text
from tests.conftest import make_config
from tests.store_helpers import sql
from tests.wire import NdjsonPeer, call_ok

ALICE = {"user_id": "alice", "chat_id": "chat-1"}
BOB = {"user_id": "bob", "chat_id": "chat-1"}


async def start(nursery: trio.Nursery, base: Path, **lifecycle: Any) -> tuple[Daemon, NdjsonPeer]:
    daemon = Daemon(make_config(base, lifecycle=lifecycle))
    await nursery.start(daemon.run)
    return daemon, await NdjsonPeer.connect(daemon.config.socket_path)


async def contents(peer: NdjsonPeer, who: dict[str, str] = ALICE) -> list[str]:
    listed = await call_ok(peer, "memory.list", {**who, "limit": 100})
    return sorted(memory["content"] for memory in listed)


async def test_pin_by_prefix_shows_pinned_in_get_search_and_list(peer: NdjsonPeer) -> None:
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "My locker code is 7731"})
    pinned = await call_ok(peer, "memory.pin", {**ALICE, "memory_id": added["short_id"]})
    assert pinned["id"] == added["id"] and pinned["pinned"] is True
    assert (await call_ok(peer, "memory.get", {**ALICE, "memory_id": added["id"]}))["pinned"] is True
    assert (await call_ok(peer, "memory.search", {**ALICE, "query": "locker code"}))[0]["pinned"] is True
    unpinned = await call_ok(peer, "memory.unpin", {**ALICE, "memory_id": added["id"]})
    assert unpinned["pinned"] is False
    assert (await call_ok(peer, "memory.list", {**ALICE}))[0]["pinned"] is False


async def test_pin_follows_the_visibility_of_delete(peer: NdjsonPeer) -> None:
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "Alice's private note"})
    refused = await peer.call("memory.pin", {**BOB, "memory_id": added["id"]})
    assert refused["error"]["data"]["field"] == "memory_id"
    missing = await peer.call("memory.unpin", {**ALICE, "memory_id": "0000000000000000"})
    assert missing["error"]["data"]["field"] == "memory_id"
    bad = await peer.call("memory.pin", {**ALICE})
    assert bad["error"]["code"] == -32602 and "memory_id" in bad["error"]["message"]
    assert (await call_ok(peer, "memory.get", {**ALICE, "memory_id": added["id"]}))["pinned"] is False


async def test_pinning_clears_the_expiry_so_it_never_expires(peer: NdjsonPeer) -> None:
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "Desk 12 is mine", "expires_days": 0.00002})
    assert added["expires_at"] is not None
    pinned = await call_ok(peer, "memory.pin", {**ALICE, "memory_id": added["id"]})
    assert pinned["expires_at"] is None
    await trio.sleep(2.0)  # past the expiry it had
    assert await contents(peer) == ["Desk 12 is mine"]


async def test_the_cap_holds_at_every_add_and_keeps_the_allergy(short_tmp: Path, nursery: trio.Nursery) -> None:
    _, peer = await start(nursery, short_tmp, max_entries_per_user=5, protect_recent_days=0.0)
    await call_ok(
        peer, "memory.add", {**ALICE, "content": "I am severely allergic to peanuts", "source_username": "alice"}
    )
    for number in range(8):
        await call_ok(peer, "memory.add", {**ALICE, "content": f"Passing remark number {number} about the weather"})
        assert len(await contents(peer)) <= 5
    kept = await contents(peer)
    assert len(kept) == 5 and "I am severely allergic to peanuts" in kept
    # The oldest remarks went first (equal strength otherwise).
    assert "Passing remark number 0 about the weather" not in kept
    events = sql(short_tmp / "data" / "memoryd.db", "SELECT count(*) FROM audit_events WHERE event = 'evicted'")
    assert events == [(4,)]


async def test_a_memory_found_by_searches_outlives_one_never_found(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon, peer = await start(nursery, short_tmp, max_entries_per_user=3, protect_recent_days=0.0)
    await call_ok(peer, "memory.add", {**ALICE, "content": "The wifi password at home is orchid"})
    await call_ok(peer, "memory.add", {**ALICE, "content": "Saw a red car today"})
    await call_ok(peer, "memory.add", {**ALICE, "content": "Bus 42 was late"})
    for _ in range(5):
        # One hit a search: the other two are never found (with more hits a weak match could be
        # returned too, and count as found).
        hits = await call_ok(peer, "memory.search", {**ALICE, "query": "wifi password", "limit": 1})
        assert [hit["content"] for hit in hits] == ["The wifi password at home is orchid"]
    assert daemon.maintenance is not None
    await daemon.maintenance.lifecycle.flush_hits()  # the hit counts reach the rows
    db = short_tmp / "data" / "memoryd.db"
    with trio.fail_after(10):  # (or the maintenance task's own flush, if it drained them first)
        while sql(db, "SELECT max(access_count) FROM memories") != [(5,)]:
            await trio.sleep(0.05)
    await call_ok(peer, "memory.add", {**ALICE, "content": "Lunch was a sandwich"})
    kept = await contents(peer)
    assert "The wifi password at home is orchid" in kept and "Saw a red car today" not in kept


async def test_a_pinned_memory_is_never_evicted(short_tmp: Path, nursery: trio.Nursery) -> None:
    _, peer = await start(nursery, short_tmp, max_entries_per_user=2, protect_recent_days=0.0)
    first = await call_ok(peer, "memory.add", {**ALICE, "content": "Trivia: the sky was grey"})
    await call_ok(peer, "memory.pin", {**ALICE, "memory_id": first["id"]})
    for number in range(4):
        await call_ok(peer, "memory.add", {**ALICE, "content": f"Health note {number}: takes insulin daily"})
    kept = await contents(peer)
    assert len(kept) == 2 and "Trivia: the sky was grey" in kept


async def test_superseded_memories_are_evicted_before_live_ones(short_tmp: Path, nursery: trio.Nursery) -> None:
    _, peer = await start(nursery, short_tmp, max_entries_per_user=2, protect_recent_days=0.0)
    old = await call_ok(peer, "memory.add", {**ALICE, "content": "My phone number is 555-0100"})
    await call_ok(peer, "memory.add", {**ALICE, "content": "Trivia: it rained"})
    newer = await call_ok(
        peer, "memory.add", {**ALICE, "content": "My phone number is 555-0199", "supersedes": old["id"]}
    )
    assert old["id"] in newer["superseded"]
    assert await contents(peer) == ["My phone number is 555-0199", "Trivia: it rained"]
    rows = sql(
        short_tmp / "data" / "memoryd.db", "SELECT deleted_at_ms IS NOT NULL FROM memories WHERE id = ?", (old["id"],)
    )
    assert rows == [(1,)]


async def test_memoryd_gc_enforces_the_cap_and_its_dry_run_counts(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon, peer = await start(nursery, short_tmp)
    for number in range(6):
        await call_ok(peer, "memory.add", {**ALICE, "content": f"Note {number}"})
    daemon.request_stop()
    await trio.sleep(0.5)
    capped = {"MEMORYD_LIFECYCLE_MAX_ENTRIES_PER_USER": "4"}
    dry = memoryd("gc", "--dry-run", data_dir=short_tmp / "data", env=capped)
    assert dry.returncode == 0 and "would evict up to 2 memories past max_entries" in text(dry), text(dry)
    assert (
        json.loads(memoryd("gc", "--dry-run", "--json", data_dir=short_tmp / "data", env=capped).stdout)["evicted"] == 2
    )
    live = sql(short_tmp / "data" / "memoryd.db", "SELECT count(*) FROM memories WHERE deleted_at_ms IS NULL")
    assert live == [(6,)]  # a dry run evicts nothing
    done = memoryd("gc", "--json", data_dir=short_tmp / "data", env=capped)
    assert done.returncode == 0, text(done)
    assert json.loads(done.stdout)["evicted"] == 2
    live = sql(short_tmp / "data" / "memoryd.db", "SELECT count(*) FROM memories WHERE deleted_at_ms IS NULL")
    assert live == [(4,)]


async def test_an_import_past_the_cap_is_evicted_by_memoryd_gc(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon, peer = await start(nursery, short_tmp)
    kept = await call_ok(peer, "memory.add", {**ALICE, "content": "Note kept"})
    await call_ok(peer, "memory.pin", {**ALICE, "memory_id": kept["id"]})
    for number in range(5):
        await call_ok(peer, "memory.add", {**ALICE, "content": f"Note {number}"})
    daemon.request_stop()
    await trio.sleep(0.5)
    dump = short_tmp / "export.jsonl"
    dump.write_bytes(b"".join(export_lines(short_tmp / "data")))
    capped = {"MEMORYD_LIFECYCLE_MAX_ENTRIES_PER_USER": "4"}
    restored = short_tmp / "restored"
    done = memoryd("import", str(dump), data_dir=restored, env=capped)
    assert done.returncode == 0, text(done)
    done = memoryd("gc", "--json", data_dir=restored, env=capped)
    assert done.returncode == 0, text(done)
    assert json.loads(done.stdout)["evicted"] == 2
    live = sql(restored / "memoryd.db", "SELECT id FROM memories WHERE deleted_at_ms IS NULL")
    assert len(live) == 4 and (kept["id"],) in live
