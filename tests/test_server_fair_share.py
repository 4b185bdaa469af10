"""One peer cannot lock the others out: per-uid shares, reserved and probe slots, frame deadlines.

The floods come from other uids over real sockets (tests/wire.py ``connect_as_uid``: a child
process switches uid, connects, and hands the sockets back), so the daemon sees real
SO_PEERCRED uids.  The policy itself is tested without sockets at the end.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from memoryd.server.admission import Admission, Slot
from memoryd.server.daemon import Daemon
from tests.conftest import make_config
from tests.wire import NdjsonPeer, call_ok, can_switch_uid, connect_as_uid

FLOOD_UID = 65534
OTHER_UID = 65533
ROOT = 0

needs_root = pytest.mark.skipif(not can_switch_uid(), reason="needs root to connect as other uids")


async def until_all_seen(instance: Daemon, connections: int) -> None:
    """Until the daemon has admitted or refused ``connections`` connections."""
    server = instance.server
    assert server is not None
    with trio.fail_after(30):
        while server.counters.connections_total + server.counters.connections_rejected < connections:
            await trio.sleep(0.01)


async def start_open_daemon(
    base: Path, nursery: trio.Nursery, *, trusted: list[int] | None = None, **limits: Any
) -> Daemon:
    """A daemon whose socket other uids may open (mode 0666 in a 0755 directory)."""
    base.chmod(0o755)
    config = make_config(base, limits=limits, socket_mode="0666")
    if trusted is not None:
        config = msgspec.structs.replace(config, auth=msgspec.structs.replace(config.auth, trusted_uids=trusted))
    instance = Daemon(config)
    await nursery.start(instance.run)
    return instance


def blocking_call(sock: socket.socket, method: str, params: dict[str, Any] | None = None) -> Any:
    """One NDJSON call on a blocking socket; None if the daemon closed it without a reply."""
    sock.settimeout(10)
    sock.sendall(json.dumps({"jsonrpc": "2.0", "method": method, "id": 1, "params": params or {}}).encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


@needs_root
async def test_an_idle_flood_from_one_uid_leaves_other_uids_their_calls_and_health(
    short_tmp: Path, nursery: trio.Nursery
) -> None:
    limits = {"max_connections": 20, "max_connections_per_uid": 8, "health_probe_connections": 2}
    instance = await start_open_daemon(short_tmp, nursery, **limits)
    path = instance.config.socket_path
    # 30 connections that never send a byte: more than max_connections.
    flood = await trio.to_thread.run_sync(connect_as_uid, path, FLOOD_UID, 30)
    await until_all_seen(instance, 30)
    try:
        peer = await NdjsonPeer.connect(path)  # uid 0: another uid
        added = await call_ok(peer, "memory.add", {"user_id": "u", "content": "still served"})
        assert added["id"]
        assert (await call_ok(peer, "system.health", {}))["status"] == "ok"
        other = (await trio.to_thread.run_sync(connect_as_uid, path, OTHER_UID, 1))[0]
        with other:
            reply = await trio.to_thread.run_sync(blocking_call, other, "memory.search", {"user_id": "v", "query": "x"})
            assert "result" in reply, reply
        server = instance.server
        assert server is not None
        assert server.admission.open_by_uid[FLOOD_UID] == 8
        # The flood got its share, two probe slots, and -32003 for the other 20.
        assert server.stats()["connections_rejected"] >= 20
        await peer.aclose()
    finally:
        for sock in flood:
            sock.close()
    instance.request_stop()


@needs_root
async def test_past_the_regular_slots_trusted_uids_are_served_and_others_may_only_probe_health(
    short_tmp: Path, nursery: trio.Nursery
) -> None:
    limits = {
        "max_connections": 6,
        "max_connections_per_uid": 6,
        "reserved_connections": 2,
        "health_probe_connections": 2,
    }
    instance = await start_open_daemon(short_tmp, nursery, trusted=[ROOT], **limits)
    path = instance.config.socket_path
    flood = await trio.to_thread.run_sync(connect_as_uid, path, FLOOD_UID, 6)  # every regular slot
    await until_all_seen(instance, 6)
    try:
        host = await NdjsonPeer.connect(path)  # root is trusted: a reserved slot, full service
        await call_ok(host, "memory.add", {"user_id": "u", "content": "the host still writes"})
        [probe] = await trio.to_thread.run_sync(connect_as_uid, path, OTHER_UID, 1)
        with probe:
            health = await trio.to_thread.run_sync(blocking_call, probe, "system.health")
            assert health["result"]["status"] == "ok"
            refused = await trio.to_thread.run_sync(blocking_call, probe, "memory.list", {"user_id": "v"})
            assert refused["error"]["code"] == -32003
            assert "system.health" in refused["error"]["data"]["reason"]
        server = instance.server
        assert server is not None
        assert server.admission.open[Slot.RESERVED] == 1
        await host.aclose()
    finally:
        for sock in flood:
            sock.close()
    instance.request_stop()


async def test_a_trickled_frame_is_cut_off_at_frame_timeout(short_tmp: Path, nursery: trio.Nursery) -> None:
    instance = Daemon(make_config(short_tmp, limits={"frame_timeout": 0.5}))
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(instance.config.socket_path)
    await peer.send_raw(b'{"jsonrpc":"2.0",')

    async def trickle() -> None:
        # A byte every 0.1 s: an idle timer restarted by each byte would never fire.
        for byte in b'"method":"system.health","id":1' * 10:
            await trio.sleep(0.1)
            try:
                await peer.send_raw(bytes([byte]))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return

    async with trio.open_nursery() as inner:
        inner.start_soon(trickle)
        with trio.fail_after(10):
            reply = json.loads(await peer.receive_raw() or b"null")
            # Then closed.  A byte the trickle sent after the server stopped reading makes the
            # kernel report the close as a reset instead of EOF (unread data was discarded).
            try:
                assert await peer.receive_raw() is None
            except trio.BrokenResourceError:
                pass
        inner.cancel_scope.cancel()
    assert reply["id"] is None and reply["error"]["code"] == -32005
    assert reply["error"]["data"]["limit"] == "frame_timeout"
    assert instance.server is not None and instance.server.stats()["frame_timeouts"] == 1
    instance.request_stop()


def test_admission_gives_each_uid_its_share_then_reserved_then_probe_slots() -> None:
    admission = Admission(max_connections=4, max_per_uid=2, reserved=1, probes=1, trusted_uids=[0])
    a1, a2 = admission.admit(1000), admission.admit(1000)
    assert a1 is not None and a2 is not None and a1.slot is a2.slot is Slot.REGULAR
    assert admission.admit(1000) is None  # over its share, and no probe slot for a hoarder
    assert [admission.admit(uid).slot for uid in (1001, 1002)] == [Slot.REGULAR, Slot.REGULAR]  # type: ignore[union-attr]
    probe = admission.admit(1003)
    assert probe is not None and probe.slot is Slot.PROBE  # regular slots full
    assert admission.admit(1004) is None  # the probe slot is taken
    trusted = admission.admit(0)
    assert trusted is not None and trusted.slot is Slot.RESERVED
    assert admission.admit(0) is None  # the reserve is spent too
    admission.release(a1)
    again = admission.admit(1000)
    assert again is not None and again.slot is Slot.REGULAR
    for ticket in (a2, again, probe, trusted):
        admission.release(ticket)
    assert admission.open_by_uid == {1001: 1, 1002: 1}


def test_trusted_uids_are_not_held_to_the_per_uid_share() -> None:
    admission = Admission(max_connections=10, max_per_uid=1, reserved=0, probes=0, trusted_uids=[os.getuid()])
    assert all(admission.admit(os.getuid()) is not None for _ in range(10))
    assert admission.admit(os.getuid()) is None
