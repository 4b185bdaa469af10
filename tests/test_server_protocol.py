"""The wire protocol end to end: both framings, batches, notifications, pipelining, limits."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import trio

from memoryd.server.daemon import Daemon
from tests.conftest import make_config
from tests.wire import NdjsonPeer, PrefixPeer

ALICE = {"user_id": "alice"}


async def test_line_framing_serves_a_call(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    reply = await peer.call("system.health", {}, id="abc")
    assert reply["jsonrpc"] == "2.0" and reply["id"] == "abc"
    assert reply["result"]["status"] == "ok"


async def test_length_prefix_framing_serves_a_call_and_replies_in_kind(daemon: Daemon) -> None:
    peer = await PrefixPeer.connect(daemon.config.socket_path)
    reply = await peer.call("memory.add", {**ALICE, "content": "allergic to peanuts"}, id=7)
    assert reply["id"] == 7 and len(reply["result"]["id"]) == 26
    reply = await peer.call("memory.search", {**ALICE, "query": "peanuts"}, id=8)
    assert [hit["content"] for hit in reply["result"]] == ["allergic to peanuts"]


async def test_leading_whitespace_selects_line_framing(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await peer.send_raw(b'\n  {"jsonrpc":"2.0","method":"system.health","id":1}\r\n')
    assert (await peer.receive())["id"] == 1


async def test_ids_may_be_strings_numbers_or_null(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    for request_id in ("x", 0, -5, 2.5, None):
        reply = await peer.call("system.health", {}, id=request_id)
        assert reply["id"] == request_id and "result" in reply


async def test_batch_answers_each_call_in_order_and_skips_notifications(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await peer.send(
        [
            {"jsonrpc": "2.0", "method": "memory.add", "params": {**ALICE, "content": "likes tea"}, "id": 1},
            {"jsonrpc": "2.0", "method": "system.health"},
            {"jsonrpc": "2.0", "method": "no.such", "id": 2},
            {"foo": "bar"},
            {"jsonrpc": "2.0", "method": "memory.list", "params": ALICE, "id": 3},
        ]
    )
    replies = await peer.receive()
    assert [r.get("id") for r in replies] == [1, 2, None, 3]
    assert "result" in replies[0]
    assert replies[1]["error"]["code"] == -32601
    assert replies[2]["error"]["code"] == -32600
    assert isinstance(replies[3]["result"], list)


async def test_empty_batch_is_one_invalid_request(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await peer.send_raw(b"[]\n")
    reply = await peer.receive()
    assert reply == {"jsonrpc": "2.0", "id": None, "error": reply["error"]}
    assert reply["error"]["code"] == -32600


async def test_notifications_get_no_reply(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await peer.send({"jsonrpc": "2.0", "method": "memory.add", "params": {**ALICE, "content": "quiet fact"}})
    await peer.send([{"jsonrpc": "2.0", "method": "system.health"}, {"jsonrpc": "2.0", "method": "nope"}])
    reply = await peer.call("memory.list", ALICE, id="after")
    assert reply["id"] == "after"  # the first reply on the wire is for the request
    # The notification was still carried out (concurrently, so wait for it).
    with trio.fail_after(5):
        while not (await peer.call("memory.list", ALICE))["result"]:
            await trio.sleep(0.01)
    assert [m["content"] for m in (await peer.call("memory.list", ALICE))["result"]] == ["quiet fact"]


async def test_pipelined_requests_on_one_connection_all_get_answers(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    lines = b"".join(
        json.dumps(
            {"jsonrpc": "2.0", "method": "memory.add", "params": {**ALICE, "content": f"fact {i}"}, "id": i}
        ).encode()
        + b"\n"
        for i in range(100)
    )
    await peer.send_raw(lines)
    replies = [await peer.receive() for _ in range(100)]
    assert sorted(r["id"] for r in replies) == list(range(100))
    assert all("result" in r for r in replies)
    listed = await peer.call("memory.list", {**ALICE, "limit": 1000}, id="l")
    assert len(listed["result"]) == 100


async def test_protocol_errors_have_their_codes(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    # The first byte fixes the framing for the connection; after that any line is a message.
    assert "result" in await peer.call("system.health", {})
    cases = [
        (b"this is not json\n", -32700),
        (b'{"jsonrpc": "2.0", "method": "system.health", "id": 1\n', -32700),
        (b'\xff\xfe{"jsonrpc": "2.0"}\n', -32700),
        (b'{"jsonrpc": "2.0", "method": "x", "params": {}, "id": "\xc3\x28"}\n', -32700),
        (b'{"jsonrpc": "1.0", "method": "system.health", "id": 1}\n', -32600),
        (b'{"jsonrpc": "2.0", "method": 5, "id": 1}\n', -32600),
        (b'{"jsonrpc": "2.0", "method": "system.health", "id": {"a": 1}}\n', -32600),
        (b"42\n", -32600),
        (b'{"jsonrpc": "2.0", "method": "memory.frobnicate", "id": 1}\n', -32601),
        (b'{"jsonrpc": "2.0", "method": "memory.list", "params": ["alice"], "id": 1}\n', -32602),
    ]
    for raw, code in cases:
        await peer.send_raw(raw)
        reply = await peer.receive()
        assert reply["error"]["code"] == code, (raw, reply)
    # The connection survives every one of them.
    assert "result" in await peer.call("system.health", {})


async def test_oversized_message_errors_and_closes_only_that_connection(short_tmp: Path, nursery: trio.Nursery) -> None:
    instance = Daemon(make_config(short_tmp, limits={"max_message_bytes": 4096}))
    await nursery.start(instance.run)
    bystander = await NdjsonPeer.connect(instance.config.socket_path)
    big = await NdjsonPeer.connect(instance.config.socket_path)
    payload = {"jsonrpc": "2.0", "method": "memory.add", "params": {**ALICE, "content": "x" * 10_000}, "id": 1}
    await big.send(payload)
    reply = await big.receive()
    assert reply["error"]["code"] == -32004
    assert await big.receive_raw() is None  # closed
    prefixed = await PrefixPeer.connect(instance.config.socket_path)
    await prefixed.stream.send_all(struct.pack(">I", 1 << 30))
    assert (await prefixed.receive())["error"]["code"] == -32004
    assert "result" in await bystander.call("system.health", {})
    instance.request_stop()


async def test_idle_connection_is_closed(short_tmp: Path, nursery: trio.Nursery) -> None:
    instance = Daemon(make_config(short_tmp, limits={"idle_timeout": 0.2}))
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(instance.config.socket_path)
    assert "result" in await peer.call("system.health", {})
    with trio.fail_after(5):
        assert await peer.receive_raw() is None
    instance.request_stop()


async def test_connections_past_the_limit_are_told_overloaded(short_tmp: Path, nursery: trio.Nursery) -> None:
    limits = {"max_connections": 2, "health_probe_connections": 0}
    instance = Daemon(make_config(short_tmp, limits=limits))
    await nursery.start(instance.run)
    held = [await NdjsonPeer.connect(instance.config.socket_path) for _ in range(2)]
    for peer in held:
        assert "result" in await peer.call("system.health", {})
    extra = await NdjsonPeer.connect(instance.config.socket_path)
    reply = await extra.call("system.health", {})
    assert reply["error"]["code"] == -32003
    await held[0].aclose()
    await trio.sleep(0.1)
    again = await NdjsonPeer.connect(instance.config.socket_path)
    assert "result" in await again.call("system.health", {})
    instance.request_stop()


async def test_hundred_concurrent_clients_each_get_their_own_answers(daemon: Daemon) -> None:
    results: dict[int, list[str]] = {}

    async def client(n: int) -> None:
        peer = await NdjsonPeer.connect(daemon.config.socket_path)
        user = {"user_id": f"user-{n}"}
        for i in range(3):
            reply = await peer.call("memory.add", {**user, "content": f"note {i} of user {n}"}, id=i)
            assert "result" in reply, reply
        listed = await peer.call("memory.list", user, id="list")
        results[n] = [m["content"] for m in listed["result"]]
        await peer.aclose()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for n in range(100):
                nursery.start_soon(client, n)
    assert len(results) == 100
    for n, contents in results.items():
        assert sorted(contents) == sorted(f"note {i} of user {n}" for i in range(3))


async def test_a_client_that_vanishes_mid_request_does_not_hurt_others(daemon: Daemon) -> None:
    for _ in range(20):
        rude = await NdjsonPeer.connect(daemon.config.socket_path)
        await rude.send_raw(
            b'{"jsonrpc": "2.0", "method": "memory.list", "params": {"user_id": "a"}, "id": 1}\n{"jsonrp'
        )
        await rude.aclose()
    polite = await NdjsonPeer.connect(daemon.config.socket_path)
    assert "result" in await polite.call("system.health", {})


async def test_a_large_batch_is_answered_in_full_and_in_order(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    batch = [
        {"jsonrpc": "2.0", "method": "memory.add", "params": {**ALICE, "content": f"batched fact {i}"}, "id": i}
        for i in range(500)
    ]
    await peer.send(batch)
    replies = await peer.receive()
    assert [reply["id"] for reply in replies] == list(range(500))
    assert all("result" in reply for reply in replies)
    listed = await peer.call("memory.list", {**ALICE, "limit": 1000})
    assert len(listed["result"]) == 500


async def test_a_client_that_never_reads_its_replies_is_cut_off(short_tmp: Path, nursery: trio.Nursery) -> None:
    instance = Daemon(make_config(short_tmp, limits={"idle_timeout": 0.5}))
    await nursery.start(instance.run)
    writer = await NdjsonPeer.connect(instance.config.socket_path)
    for i in range(20):
        await writer.call("memory.add", {**ALICE, "content": f"{i} " + "padding " * 1900})
    # Ask for megabytes of replies and never read them: the socket buffers fill up.
    request = json.dumps({"jsonrpc": "2.0", "method": "memory.list", "params": {**ALICE, "limit": 1000}, "id": 1})
    # One write, so the daemon reads most of them before it is cut off.
    with trio.move_on_after(3):
        await writer.send_raw((request.encode() + b"\n") * 200)
    polite = await NdjsonPeer.connect(instance.config.socket_path)
    health_calls = 0
    with trio.fail_after(30):
        # Cut off: counted, and gone once the calls it had running are done (only the polite
        # connection is left).
        while True:
            server = (await polite.call("system.health", {}))["result"]["server"]
            health_calls += 1
            if server["stalled_connections"] == 1 and server["connections_open"] == 1:
                break
            await trio.sleep(0.05)
    # Those it had running finished; the ones read but not yet started were not run for a client
    # that reads nothing.
    lists_run = server["requests_total"] - 20 - health_calls
    assert 1 <= lists_run <= instance.config.limits.max_inflight_per_connection
    instance.request_stop()
