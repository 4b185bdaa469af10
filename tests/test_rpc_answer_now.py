"""answer_now, the inline path: the same reply as serve_message for every payload it answers, and
NOT_NOW (nothing run, nothing counted) for everything else."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from memoryd.errors import NotFound
from memoryd.rpc.budget import ReplyBudget, SharedBudget
from memoryd.rpc.deadlines import RequestGuard
from memoryd.rpc.dispatch import NOT_NOW, CallContext, MethodTable, answer_now, serve_message

CTX = CallContext(peer_uid=1000, peer_pid=4242, peer_gid=1000, connection_id=7)


class Value(msgspec.Struct, forbid_unknown_fields=True):
    value: int = 0


class Calls:
    def __init__(self) -> None:
        self.now = 0
        self.awaited = 0


def table_for(calls: Calls) -> MethodTable:
    table = MethodTable()

    def double_now(params: Value, ctx: CallContext) -> Any:
        calls.now += 1
        if params.value < 0:
            return NOT_NOW  # "the cache is cold": the async form must run
        if params.value == 13:
            raise NotFound("no thirteen", {"value": 13})
        if params.value == 99:
            raise RuntimeError("a bug")
        return {"doubled": params.value * 2}

    async def double(params: Value, ctx: CallContext) -> Any:
        calls.awaited += 1
        if params.value == 13:
            raise NotFound("no thirteen", {"value": 13})
        if params.value == 99:
            raise RuntimeError("a bug")
        return {"doubled": abs(params.value) * 2}

    async def slow(params: Value, ctx: CallContext) -> Any:
        calls.awaited += 1
        return "slow"

    table.register("double", Value, double, now=double_now)
    table.register("slow", Value, slow)
    return table


ANSWERED_NOW = [
    '{"jsonrpc":"2.0","method":"double","params":{"value":4},"id":1}',
    '{"jsonrpc":"2.0","method":"double","id":"no-params"}',
    '{"jsonrpc":"2.0","method":"double","params":{"value":13},"id":2}',
    '{"jsonrpc":"2.0","method":"double","params":{"value":99},"id":3}',
    '{"jsonrpc":"2.0","method":"double","params":{"value":"x"},"id":4}',
    '{"jsonrpc":"2.0","method":"double","params":{"nope":1},"id":5}',
    '{"jsonrpc":"2.0","method":"double","params":[1],"id":6}',
    '{"jsonrpc":"2.0","method":"no.such","id":7}',
    '{"jsonrpc":"2.0","method":"double","params":{"value":4}}',
    '{"jsonrpc":"2.0","method":"no.such"}',
    '{"jsonrpc":"1.0","method":"double","id":8}',
    '{"jsonrpc":"2.0","method":"double","params":7,"id":9}',
    '{"jsonrpc":"2.0","method":"double","params":{"value":4},"id":1e400}',
    "[]",
    "42",
    "{not json",
    b'{"jsonrpc":"2.0","method":"\xff","id":1}',
]


@pytest.mark.parametrize("payload", ANSWERED_NOW)
async def test_answer_now_replies_exactly_as_serve_message(payload: str | bytes) -> None:
    data = payload.encode() if isinstance(payload, str) else payload
    now_calls, awaited_calls = Calls(), Calls()
    now = answer_now(data, table_for(now_calls), CTX)
    assert now is not NOT_NOW
    awaited = await serve_message(data, table_for(awaited_calls), CTX)
    assert now == awaited
    assert now_calls.awaited == 0  # nothing was left for a task


@pytest.mark.parametrize(
    "payload",
    [
        '{"jsonrpc":"2.0","method":"slow","id":1}',  # no now form
        '{"jsonrpc":"2.0","method":"double","params":{"value":-3},"id":2}',  # now says NOT_NOW
        '[{"jsonrpc":"2.0","method":"double","params":{"value":1},"id":3}]',  # batches run as tasks
    ],
)
async def test_calls_that_must_wait_are_not_now_and_serve_message_answers_them(payload: str) -> None:
    calls = Calls()
    table = table_for(calls)
    assert answer_now(payload.encode(), table, CTX) is NOT_NOW
    reply = await serve_message(payload.encode(), table, CTX)
    assert reply is not None and "result" in reply.decode()


async def test_the_guard_counts_only_calls_answered_now_and_refuses_during_shutdown() -> None:
    guard = RequestGuard(request_timeout=5.0)
    table = table_for(Calls()).guarded_by(guard)
    answer_now(b'{"jsonrpc":"2.0","method":"double","params":{"value":1},"id":1}', table, CTX)
    assert answer_now(b'{"jsonrpc":"2.0","method":"double","params":{"value":-1},"id":2}', table, CTX) is NOT_NOW
    assert guard.requests_total == 1
    await serve_message(b'{"jsonrpc":"2.0","method":"double","params":{"value":-1},"id":2}', table, CTX)
    assert guard.requests_total == 2  # the NOT_NOW call is counted once, when it really runs
    guard.refuse_new_calls()
    reply = answer_now(b'{"jsonrpc":"2.0","method":"double","params":{"value":1},"id":3}', table, CTX)
    assert isinstance(reply, bytes) and json.loads(reply)["error"]["code"] == -32006


async def test_a_probe_table_refuses_other_methods_now() -> None:
    refusal = NotFound("probe only")
    table = table_for(Calls()).restricted_to(frozenset({"slow"}), refusal)
    reply = answer_now(b'{"jsonrpc":"2.0","method":"double","params":{"value":1},"id":1}', table, CTX)
    assert reply == await serve_message(b'{"jsonrpc":"2.0","method":"double","params":{"value":1},"id":1}', table, CTX)
    assert isinstance(reply, bytes) and json.loads(reply)["error"]["message"] == "probe only"


async def test_a_reply_over_the_connections_share_is_replaced_by_the_limits_error_now() -> None:
    budgets = [ReplyBudget(40, SharedBudget(10_000)) for _ in range(2)]
    payload = b'{"jsonrpc":"2.0","method":"double","params":{"value":4},"id":1}'
    now = answer_now(payload, table_for(Calls()), CTX, budget=budgets[0])
    awaited = await serve_message(payload, table_for(Calls()), CTX, budget=budgets[1])
    assert now == awaited
    assert isinstance(now, bytes) and json.loads(now)["error"]["data"]["limit"] == "max_reply_bytes"
    assert budgets[0].pending == budgets[1].pending == len(now)  # charged alike, released by the caller


@pytest.mark.parametrize(
    "payload",
    [
        '{"jsonrpc":"2.0","method":"nope","id":1}',  # no such method
        '{"jsonrpc":"2.0","method":"double","params":{"x":1},"id":2}',  # bad params
        '{"jsonrpc":"2.0","method":"double","params":{"value":1},"id":3}',  # answered now
    ],
)
async def test_a_guarded_call_refused_or_answered_now_is_replied_and_counted_as_in_a_task(payload: str) -> None:
    replies, counts = [], []
    for inline in (True, False):
        for refusing in (False, True):
            guard = RequestGuard(request_timeout=5.0)
            table = table_for(Calls()).guarded_by(guard)
            if refusing:
                guard.refuse_new_calls()
            if inline:
                reply = answer_now(payload.encode(), table, CTX)
            else:
                reply = await serve_message(payload.encode(), table, CTX)
            replies.append(reply)
            counts.append(guard.requests_total)
    # During shutdown both paths answer -32006 before looking the method up; neither counts it.
    assert replies[:2] == replies[2:] and counts[:2] == counts[2:] == [1, 0]
    assert isinstance(replies[1], bytes) and json.loads(replies[1])["error"]["code"] == -32006
