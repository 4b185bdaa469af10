"""JSON-RPC 2.0 over the length-prefixed framing (ash's sandbox RPC client) end to end: batches,
notifications, every id type, the error codes with their data, and a connection that survives a
bad message.  Line framing has the same checks in test_server_protocol.py."""

from __future__ import annotations

import trio

from memoryd.server.daemon import Daemon
from tests.wire import PrefixPeer

ALICE = {"user_id": "alice"}


async def test_a_batch_is_answered_in_one_prefixed_reply_without_its_notifications(daemon: Daemon) -> None:
    peer = await PrefixPeer.connect(daemon.config.socket_path)
    await peer.send(
        [
            {"jsonrpc": "2.0", "method": "memory.add", "params": {**ALICE, "content": "likes figs"}, "id": "a"},
            {"jsonrpc": "2.0", "method": "system.health"},
            {"jsonrpc": "2.0", "method": "memory.search", "params": {**ALICE, "limit": 0, "query": "figs"}, "id": 2},
            7,
            {"jsonrpc": "2.0", "method": "no.such", "id": None},
        ]
    )
    replies = await peer.receive()
    assert [reply["id"] for reply in replies] == ["a", 2, None, None]
    assert "result" in replies[0]
    assert replies[1]["error"]["code"] == -32602
    assert replies[1]["error"]["data"] == {"field": "limit", "reason": "must be >= 1"}
    assert replies[2]["error"]["code"] == -32600 and replies[3]["error"]["code"] == -32601


async def test_notifications_get_no_prefixed_reply(daemon: Daemon) -> None:
    peer = await PrefixPeer.connect(daemon.config.socket_path)
    await peer.send({"jsonrpc": "2.0", "method": "memory.add", "params": {**ALICE, "content": "quiet fig"}})
    await peer.send([{"jsonrpc": "2.0", "method": "system.health"}, {"jsonrpc": "2.0", "method": "nope"}])
    await peer.send({"jsonrpc": "2.0", "method": "memory.add", "params": {"content": ""}})  # bad, still silent
    reply = await peer.call("system.health", {}, id="after")
    assert reply["id"] == "after"  # the first frame on the wire answers the request
    with trio.fail_after(5):
        while not (await peer.call("memory.list", ALICE))["result"]:
            await trio.sleep(0.01)


async def test_every_id_type_comes_back_and_other_types_are_invalid(daemon: Daemon) -> None:
    peer = await PrefixPeer.connect(daemon.config.socket_path)
    for request_id in ("x", "", 0, -5, 2.5, 2**70, None):
        reply = await peer.call("system.health", {}, id=request_id)
        assert reply["id"] == request_id and "result" in reply
    for bad_id in (True, [1], {"a": 1}):
        reply = await peer.call("system.health", {}, id=bad_id)
        assert reply["error"]["code"] == -32600 and reply["id"] is None


async def test_bad_messages_are_answered_in_kind_and_the_connection_serves_on(daemon: Daemon) -> None:
    peer = await PrefixPeer.connect(daemon.config.socket_path)
    answers = []
    for payload in (b"", b"{not json", b"\xff\xfe{}", b"[]", b'{"jsonrpc": "1.0", "method": "x", "id": 1}'):
        await peer.send_raw(payload)
        answers.append(await peer.receive())
    assert [answer["error"]["code"] for answer in answers] == [-32700, -32700, -32700, -32600, -32600]
    missing = await peer.call("memory.add", {"content": "x"}, id=9)
    assert missing["error"]["data"] == {"field": "user_id", "reason": "is required"}
    unknown = await peer.call("memory.list", {**ALICE, "colour": "red"}, id=10)
    assert unknown["error"]["data"] == {"field": "colour", "reason": "is not a known parameter"}
    assert (await peer.call("nope", {}, id=11))["error"]["code"] == -32601
    assert "result" in await peer.call("system.health", {}, id=12)
