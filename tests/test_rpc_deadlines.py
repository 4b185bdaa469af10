"""RequestGuard: a call's deadline and the shutdown policy, as a method table guarded by it runs them."""

from __future__ import annotations

import json
import logging
from typing import Any

import msgspec
import pytest
import trio

from memoryd.errors import DeadlineExceeded, ShuttingDown
from memoryd.rpc.deadlines import RequestGuard
from memoryd.rpc.dispatch import CallContext, MethodTable
from memoryd.rpc.envelope import Request

CTX = CallContext(connection_id=5)


class Seconds(msgspec.Struct):
    seconds: float = 0.0


def sleepy_table() -> tuple[MethodTable, list[str]]:
    table = MethodTable()
    finished: list[str] = []

    async def sleep(params: Seconds, ctx: CallContext) -> str:
        await trio.sleep(params.seconds)
        finished.append("sleep")
        return "slept"

    table.register("sleep", Seconds, sleep)
    return table, finished


def request(seconds: float, id: Any = 1, method: str = "sleep") -> Request:
    params = msgspec.Raw(json.dumps({"seconds": seconds}).encode())
    return Request(method=method, params=params, id=id, is_notification=id is None)


async def answer(table: MethodTable, call: Request) -> Any:
    reply = await table.dispatch(call, CTX)
    return None if reply is None else json.loads(reply)


async def test_a_call_within_its_deadline_is_answered(autojump_clock: trio.abc.Clock) -> None:
    table, finished = sleepy_table()
    guard = RequestGuard(request_timeout=10.0)
    reply = await answer(table.guarded_by(guard), request(9.0))
    assert reply == {"jsonrpc": "2.0", "result": "slept", "id": 1}
    assert finished == ["sleep"] and guard.requests_total == 1 and guard.in_flight == 0


async def test_a_call_past_its_deadline_is_cancelled_and_answered_deadline_exceeded(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memoryd.rpc")
    table, finished = sleepy_table()
    guarded = table.guarded_by(RequestGuard(request_timeout=2.5))
    started = trio.current_time()
    reply = await answer(guarded, request(60.0, id="slow"))
    assert trio.current_time() - started == pytest.approx(2.5)
    assert reply == {
        "jsonrpc": "2.0",
        "error": {"code": -32005, "message": "Request deadline exceeded", "data": {"timeout_seconds": 2.5}},
        "id": "slow",
    }
    assert finished == []
    [record] = caplog.records
    assert record.getMessage() == "request.deadline" and record.levelno == logging.WARNING
    assert record.fields == {"method": "sleep", "conn": 5}  # type: ignore[attr-defined]


async def test_a_method_given_a_longer_deadline_gets_it_and_the_others_do_not(autojump_clock: trio.abc.Clock) -> None:
    table, finished = sleepy_table()
    table.register("slow", Seconds, lambda params, ctx: trio.sleep(params.seconds))
    # A shorter one is ignored: no method gets less than request_timeout.
    guard = RequestGuard(request_timeout=2.0, method_timeouts={"sleep": 30.0, "slow": 1.0})
    guarded = table.guarded_by(guard)
    assert (await answer(guarded, request(20.0)))["result"] == "slept"
    late = await answer(guarded, request(40.0))
    assert late["error"]["code"] == -32005 and late["error"]["data"] == {"timeout_seconds": 30.0}
    assert (await answer(guarded, request(1.5, method="slow")))["result"] is None
    assert (await answer(guarded, request(3.0, method="slow")))["error"]["data"] == {"timeout_seconds": 2.0}
    assert finished == ["sleep"]


async def test_the_unguarded_table_has_no_deadline(autojump_clock: trio.abc.Clock) -> None:
    table, _ = sleepy_table()
    table.guarded_by(RequestGuard(request_timeout=1.0))  # a guarded view does not change the table
    assert (await answer(table, request(100.0)))["result"] == "slept"


async def test_once_shutdown_began_calls_are_refused_without_running(autojump_clock: trio.abc.Clock) -> None:
    table, finished = sleepy_table()
    guard = RequestGuard(request_timeout=10.0)
    guarded = table.guarded_by(guard)
    guard.refuse_new_calls()
    reply = await answer(guarded, request(0.0, id=7))
    assert reply["id"] == 7 and reply["error"]["code"] == -32006
    assert await answer(guarded, request(0.0, id=None)) is None  # a notification: no reply
    # Refused before lookup: an unknown method is not MethodNotFound while stopping.
    assert (await answer(guarded, request(0.0, method="nope")))["error"]["code"] == -32006
    assert finished == [] and guard.requests_total == 0


async def test_calls_running_when_the_grace_period_ends_are_answered_shutting_down(
    autojump_clock: trio.abc.Clock,
) -> None:
    table, finished = sleepy_table()
    guard = RequestGuard(request_timeout=100.0)
    guarded = table.guarded_by(guard)
    replies: list[Any] = []

    async def call(id: int) -> None:
        replies.append(await answer(guarded, request(50.0, id=id)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, 1)
        nursery.start_soon(call, 2)
        await trio.sleep(1.0)
        assert guard.in_flight == 2
        guard.cancel_running()
    assert sorted((r["id"], r["error"]["code"]) for r in replies) == [(1, -32006), (2, -32006)]
    assert finished == [] and guard.in_flight == 0 and guard.requests_total == 2


async def test_the_guard_raises_rather_than_replies(autojump_clock: trio.abc.Clock) -> None:
    guard = RequestGuard(request_timeout=1.0)

    async def forever(call: Request, ctx: CallContext) -> None:
        await trio.sleep_forever()

    with pytest.raises(DeadlineExceeded):
        await guard.run(forever, request(0.0), CTX)
    guard.refuse_new_calls()
    with pytest.raises(ShuttingDown):
        await guard.run(forever, request(0.0), CTX)


def test_request_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError):
        RequestGuard(request_timeout=0)
