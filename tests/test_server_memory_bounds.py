"""Memory stays bounded on a real socket: a peer that never reads its replies, and many peers
holding unfinished frames, are held to ``max_reply_bytes`` and ``max_buffered_bytes``.

The checks are structural (the server's own count of buffered bytes), not timings or RSS: the
RSS figures are in bench/bench_limits.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio

from memoryd.server.connection import RECEIVE_CHUNK
from memoryd.server.daemon import Daemon
from tests.conftest import make_config
from tests.wire import NdjsonPeer

HEALTH_BATCH = json.dumps([{"jsonrpc": "2.0", "method": "system.health", "id": i} for i in range(300)]).encode() + b"\n"


async def test_a_peer_that_never_reads_holds_at_most_its_reply_share(short_tmp: Path, nursery: trio.Nursery) -> None:
    limits = {"max_reply_bytes": 64 * 1024, "max_buffered_bytes": 1024 * 1024, "idle_timeout": 60.0}
    instance = Daemon(make_config(short_tmp, limits=limits))
    await nursery.start(instance.run)
    server = instance.server
    assert server is not None
    peer = await NdjsonPeer.connect(instance.config.socket_path)
    # 30 batches of 300 health calls (each reply some 100 KB) pipelined, and never a read.
    with trio.move_on_after(3):
        for _ in range(30):
            await peer.send_raw(HEALTH_BATCH)
    peak = 0
    for _ in range(20):
        await trio.sleep(0.05)
        peak = max(peak, server.budget.used)
    # One share, plus the short errors of the batches already running when it filled.
    assert 0 < peak <= 64 * 1024 + 32 * 300 * 200
    # Now read: every answered call got a result or the limit's error.
    codes: set[int] = set()
    with trio.fail_after(30):
        for _ in range(3):
            for answer in json.loads(await peer.receive_raw() or b"[]"):
                codes.add(answer["error"]["code"] if "error" in answer else 0)
    # -32003: under load the shared budget may also fill, and a call is then refused as overloaded.
    assert codes <= {0, -32003, -32004} and -32004 in codes
    await peer.aclose()
    # Nothing leaks once the connection is gone.  The server notices the close on its own
    # schedule (a loaded machine took more than 0.2 s), so wait for it rather than guess.
    with trio.fail_after(10):
        while server.budget.used != 0:
            await trio.sleep(0.02)
    instance.request_stop()


async def test_unfinished_frames_past_the_shared_budget_are_refused(short_tmp: Path, nursery: trio.Nursery) -> None:
    limits = {"max_message_bytes": 4 * 1024 * 1024, "max_buffered_bytes": 1024 * 1024}
    instance = Daemon(make_config(short_tmp, limits=limits))
    await nursery.start(instance.run)
    server = instance.server
    assert server is not None
    peers = [await NdjsonPeer.connect(instance.config.socket_path) for _ in range(20)]
    frame_start = b'{"jsonrpc":"2.0","method":"system.health","params":{"pad":"' + b"x" * (200 * 1024)
    refused = 0
    peak = 0
    for peer in peers:
        with trio.move_on_after(0.5):
            await peer.send_raw(frame_start)  # 200 KB of a frame that never ends
        await trio.sleep(0.02)
        peak = max(peak, server.budget.used)
    for peer in peers:
        with trio.move_on_after(0.2):
            line = await peer.receive_raw()
            if line is not None:
                answer = json.loads(line)
                assert answer["error"]["code"] == -32003 and answer["error"]["data"]["limit"] == "max_buffered_bytes"
                refused += 1
    # The budget, plus what each connection may have received in one go before it was refused.
    assert peak <= 1024 * 1024 + 2 * RECEIVE_CHUNK
    assert refused >= 10 and server.stats()["over_budget_connections"] == refused
    # Everyone else still gets answers.
    fresh = await NdjsonPeer.connect(instance.config.socket_path)
    assert "result" in await fresh.call("system.health", {})
    for peer in [*peers, fresh]:
        await peer.aclose()
    await trio.sleep(0.2)
    assert server.budget.used == 0
    instance.request_stop()
