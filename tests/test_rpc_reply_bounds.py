"""Replies are bounded before they are built: max_reply_bytes per connection, a shared budget
across connections, and max_batch_calls per batch (serve_message with a ReplyBudget, no sockets)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from memoryd.rpc.budget import ReplyBudget, SharedBudget
from memoryd.rpc.dispatch import CallContext, MethodTable, serve_message

CTX = CallContext(peer_uid=1000, peer_pid=4242, peer_gid=1000, connection_id=7)
BIG = 1000  # bytes of each result


class NoParams(msgspec.Struct):
    pass


def big_table() -> tuple[MethodTable, list[int]]:
    table = MethodTable()
    ran: list[int] = []

    async def big(params: NoParams, ctx: CallContext) -> str:
        ran.append(1)
        return "x" * BIG

    table.register("big", NoParams, big)
    return table, ran


def batch(count: int, *, notify_every: int = 0) -> bytes:
    calls: list[dict[str, Any]] = []
    for index in range(count):
        call: dict[str, Any] = {"jsonrpc": "2.0", "method": "big"}
        if not (notify_every and index % notify_every == 0):
            call["id"] = index
        calls.append(call)
    return json.dumps(calls).encode()


async def test_a_batch_whose_reply_would_pass_max_reply_bytes_stops_running_calls() -> None:
    table, ran = big_table()
    budget = ReplyBudget(max_reply_bytes=10_000, shared=SharedBudget(10**9))
    reply = await serve_message(batch(200), table, CTX, budget=budget)
    assert reply is not None
    answers = json.loads(reply)
    assert [a["id"] for a in answers] == list(range(200))  # every call answered, in order
    results = [a for a in answers if "result" in a]
    errors = [a for a in answers if "error" in a]
    assert 0 < len(results) < 10  # what fits in 10,000 bytes
    assert len(errors) == 200 - len(results)
    assert {e["error"]["code"] for e in errors} == {-32004}
    assert errors[0]["error"]["data"] == {"limit": "max_reply_bytes", "max_reply_bytes": 10_000}
    # Not built: after the limit was hit, at most the calls already running finished.
    assert len(ran) < 10 + 16
    # The reply is what is charged; the driver releases it once sent.
    assert budget.pending == len(reply) and len(reply) < 10_000 + 200 * 200
    budget.release(len(reply))
    assert budget.pending == 0 and budget.shared.used == 0


async def test_the_shared_budget_refuses_with_overloaded() -> None:
    table, _ = big_table()
    shared = SharedBudget(5_000)
    hog = ReplyBudget(max_reply_bytes=10**6, shared=shared)
    hog_reply = await serve_message(batch(100), table, CTX, budget=hog)
    assert hog_reply is not None and shared.used == len(hog_reply)
    other = ReplyBudget(max_reply_bytes=10**6, shared=shared)
    single = await serve_message(b'{"jsonrpc":"2.0","method":"big","id":"s"}', table, CTX, budget=other)
    assert single is not None
    answer = json.loads(single)
    assert answer["id"] == "s" and answer["error"]["code"] == -32003
    assert answer["error"]["data"]["limit"] == "max_buffered_bytes"
    hog.release(len(hog_reply))
    other.release(len(single))
    assert shared.used == 0


async def test_notifications_past_the_limit_stay_unanswered() -> None:
    table, _ = big_table()
    budget = ReplyBudget(max_reply_bytes=3_000, shared=SharedBudget(10**9))
    reply = await serve_message(batch(40, notify_every=2), table, CTX, budget=budget)
    assert reply is not None
    assert {a["id"] for a in json.loads(reply)} == set(range(1, 40, 2))


async def test_a_batch_over_max_batch_calls_is_refused_whole_naming_the_limit() -> None:
    table, ran = big_table()
    reply = await serve_message(batch(11), table, CTX, max_batch_calls=10)
    assert reply is not None
    answer = json.loads(reply)
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert answer["error"]["data"] == {"limit": "max_batch_calls", "max_batch_calls": 10, "calls": 11}
    assert ran == []
    assert len(json.loads(await serve_message(batch(10), table, CTX, max_batch_calls=10) or b"")) == 10
