"""MethodTable and serve_message: calls run against small real handlers, no sockets."""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any, Literal

import msgspec
import pytest
import trio

from memoryd.errors import InvalidParams, NotFound
from memoryd.rpc.dispatch import CallContext, MethodTable, serve_message
from memoryd.rpc.envelope import Request

CTX = CallContext(peer_uid=1000, peer_pid=4242, peer_gid=1000, connection_id=7)


async def serve(table: MethodTable, payload: str | bytes) -> Any:
    """The decoded reply, or None when the daemon would send nothing."""
    if isinstance(payload, str):
        payload = payload.encode()
    reply = await serve_message(payload, table, CTX)
    return None if reply is None else json.loads(reply)


# -- the examples of https://www.jsonrpc.org/specification section 7 ---------------------------


class Pair(msgspec.Struct, array_like=True):
    minuend: int
    subtrahend: int


class NamedPair(msgspec.Struct, forbid_unknown_fields=True):
    minuend: int
    subtrahend: int


class Numbers(msgspec.Struct, array_like=True):
    a: int = 0
    b: int = 0
    c: int = 0
    d: int = 0
    e: int = 0


class NoParams(msgspec.Struct, forbid_unknown_fields=True):
    pass


def spec_table(*, named_subtract: bool = False) -> tuple[MethodTable, list[str]]:
    """The spec's example server; `seen` records every call, notifications included."""
    table = MethodTable()
    seen: list[str] = []

    async def subtract(params: Pair | NamedPair, ctx: CallContext) -> int:
        seen.append("subtract")
        return params.minuend - params.subtrahend

    async def add_up(params: Numbers, ctx: CallContext) -> int:
        seen.append("sum")
        return params.a + params.b + params.c + params.d + params.e

    async def record(params: Numbers, ctx: CallContext) -> None:
        seen.append("notify")

    async def get_data(params: NoParams, ctx: CallContext) -> list[Any]:
        seen.append("get_data")
        return ["hello", 5]

    table.register("subtract", NamedPair if named_subtract else Pair, subtract)
    table.register("sum", Numbers, add_up)
    table.register("update", Numbers, record)
    table.register("notify_sum", Numbers, record)
    table.register("notify_hello", Numbers, record)
    table.register("get_data", NoParams, get_data)
    return table, seen


INVALID_REQUEST = {
    "jsonrpc": "2.0",
    "error": {"code": -32600, "message": "Invalid Request"},
    "id": None,
}
PARSE_ERROR = {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None}


@pytest.mark.parametrize(
    "request_text, expected",
    [
        (
            '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
            {"jsonrpc": "2.0", "result": 19, "id": 1},
        ),
        (
            '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
            {"jsonrpc": "2.0", "result": -19, "id": 2},
        ),
        (
            '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}',
            {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "1"},
        ),
        ('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]', PARSE_ERROR),
        ('{"jsonrpc": "2.0", "method": 1, "params": "bar"}', INVALID_REQUEST),
        (
            (
                '[\n  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},\n'
                '  {"jsonrpc": "2.0", "method"\n]'
            ),
            PARSE_ERROR,
        ),
        ("[]", INVALID_REQUEST),
        ("[1]", [INVALID_REQUEST]),
        ("[1,2,3]", [INVALID_REQUEST, INVALID_REQUEST, INVALID_REQUEST]),
        (
            """[
                {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
                {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
                {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
                {"foo": "boo"},
                {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
                {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
            ]""",
            [
                {"jsonrpc": "2.0", "result": 7, "id": "1"},
                {"jsonrpc": "2.0", "result": 19, "id": "2"},
                INVALID_REQUEST,
                {
                    "jsonrpc": "2.0",
                    "error": {"code": -32601, "message": "Method not found"},
                    "id": "5",
                },
                {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"},
            ],
        ),
    ],
)
async def test_spec_examples_with_positional_params(request_text: str, expected: Any) -> None:
    table, _ = spec_table()
    assert await serve(table, request_text) == expected


@pytest.mark.parametrize(
    "request_text, expected",
    [
        (
            '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}',
            {"jsonrpc": "2.0", "result": 19, "id": 3},
        ),
        (
            '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}',
            {"jsonrpc": "2.0", "result": 19, "id": 4},
        ),
    ],
)
async def test_spec_examples_with_named_params(request_text: str, expected: Any) -> None:
    table, _ = spec_table(named_subtract=True)
    assert await serve(table, request_text) == expected


async def test_spec_notifications_run_but_get_no_reply() -> None:
    table, seen = spec_table()
    assert await serve(table, '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}') is None
    assert await serve(table, '{"jsonrpc": "2.0", "method": "foobar"}') is None
    assert seen == ["notify"]


async def test_spec_batch_of_notifications_gets_no_reply() -> None:
    table, seen = spec_table()
    batch = """[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
    ]"""
    assert await serve(table, batch) is None
    assert seen == ["notify", "notify"]


# -- memoryd-style methods: object params validated into Structs ------------------------------


class SearchParams(msgspec.Struct, forbid_unknown_fields=True):
    user_id: str
    query: str
    chat_id: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=50)] = 10
    subjects: Annotated[list[Annotated[str, msgspec.Meta(min_length=1)]], msgspec.Meta(max_length=3)] = []
    mode: Literal["hybrid", "keyword"] = "hybrid"
    metadata: dict[str, Any] = {}


class Item(msgspec.Struct, forbid_unknown_fields=True):
    key: str


class NestedParams(msgspec.Struct, forbid_unknown_fields=True):
    items: list[Item] = []


class CheckedParams(msgspec.Struct):
    ttl_days: int = 1

    def __post_init__(self) -> None:
        if self.ttl_days == 0:
            raise ValueError("must not be zero")
        if self.ttl_days < 0:
            raise InvalidParams.for_field("ttl_days", "must be positive")


class Hit(msgspec.Struct):
    id: str
    score: float


def memory_table() -> MethodTable:
    table = MethodTable()

    async def search(params: SearchParams, ctx: CallContext) -> dict[str, Any]:
        return {
            "query": params.query,
            "limit": params.limit,
            "hits": [Hit("01HXYZ", 0.5)],
            "caller": [ctx.peer_uid, ctx.peer_pid, ctx.peer_gid, ctx.connection_id],
        }

    async def nested(params: NestedParams, ctx: CallContext) -> int:
        return len(params.items)

    async def checked(params: CheckedParams, ctx: CallContext) -> int:
        return params.ttl_days

    async def nothing(params: NoParams, ctx: CallContext) -> None:
        return None

    async def missing(params: NoParams, ctx: CallContext) -> None:
        raise NotFound("no such memory", {"memory_id": "01HX"})

    async def broken(params: NoParams, ctx: CallContext) -> None:
        raise RuntimeError("secret memory content: my PIN is 1234")

    async def unencodable(params: NoParams, ctx: CallContext) -> object:
        return object()

    table.register("memory.search", SearchParams, search)
    table.register("nested", NestedParams, nested)
    table.register("checked", CheckedParams, checked)
    table.register("nothing", NoParams, nothing)
    table.register("missing", NoParams, missing)
    table.register("broken", NoParams, broken)
    table.register("unencodable", NoParams, unencodable)
    return table


def call(method: str, params: str | None = None, id_: str = "1") -> str:
    members = ['"jsonrpc":"2.0"', f'"method":"{method}"', f'"id":{id_}']
    if params is not None:
        members.append(f'"params":{params}')
    return "{" + ",".join(members) + "}"


async def test_params_are_decoded_into_the_struct_and_ctx_is_passed() -> None:
    reply = await serve(memory_table(), call("memory.search", '{"user_id":"u","query":"tea","limit":3}'))
    assert reply == {
        "jsonrpc": "2.0",
        "result": {
            "query": "tea",
            "limit": 3,
            "hits": [{"id": "01HXYZ", "score": 0.5}],
            "caller": [1000, 4242, 1000, 7],
        },
        "id": 1,
    }


async def test_null_result_is_sent() -> None:
    assert await serve(memory_table(), call("nothing")) == {
        "jsonrpc": "2.0",
        "result": None,
        "id": 1,
    }


async def test_missing_params_decode_as_an_empty_object() -> None:
    assert await serve(memory_table(), call("checked")) == {"jsonrpc": "2.0", "result": 1, "id": 1}


async def test_array_params_for_an_object_method_are_invalid_params() -> None:
    reply = await serve(memory_table(), call("memory.search", '["u","tea"]'))
    assert reply["error"] == {
        "code": -32602,
        "message": "params must be an object",
        "data": {"field": "params", "reason": "must be an object"},
    }
    assert reply["id"] == 1


async def test_object_params_for_a_positional_method_name_the_expected_shape() -> None:
    table, _ = spec_table()
    reply = await serve(table, call("subtract", '{"minuend":1,"subtrahend":2}'))
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"field": "params", "reason": "must be an array"}


def search_with(**bad: Any) -> str:
    """memory.search params: a valid call with ``bad`` set (or replaced) on top."""
    return json.dumps({"user_id": "u", "query": "q", **bad})


@pytest.mark.parametrize(
    "method, params, field, reason",
    [
        ("memory.search", '{"query":"tea"}', "user_id", "is required"),
        ("memory.search", None, "user_id", "is required"),
        ("memory.search", search_with(colour=1), "colour", "is not a known parameter"),
        ("memory.search", search_with(limit="5"), "limit", "must be an integer"),
        ("memory.search", search_with(limit=2.5), "limit", "must be an integer"),
        ("memory.search", search_with(limit=0), "limit", "must be >= 1"),
        ("memory.search", search_with(limit=51), "limit", "must be <= 50"),
        ("memory.search", '{"user_id":"u","query":"q","limit":1e400}', "limit", "is out of range"),
        ("memory.search", search_with(query=7), "query", "must be a string"),
        ("memory.search", search_with(chat_id=5), "chat_id", "must be a string or null"),
        ("memory.search", search_with(subjects="a"), "subjects", "must be an array"),
        ("memory.search", search_with(subjects=["a", "b", 3]), "subjects[2]", "must be a string"),
        ("memory.search", search_with(subjects=["a", ""]), "subjects[1]", "must be at least 1 characters long"),
        ("memory.search", search_with(subjects=["a", "b", "c", "d"]), "subjects", "must have at most 3 items"),
        ("memory.search", search_with(mode="fuzzy"), "mode", "'fuzzy' is not an allowed value"),
        ("memory.search", search_with(metadata=[]), "metadata", "must be an object"),
        ("nested", '{"items":[{"key":"a"},{}]}', "items[1].key", "is required"),
        ("nested", '{"items":[{"key":"a","x":1}]}', "items[0].x", "is not a known field"),
        ("nested", '{"items":[{"key":1}]}', "items[0].key", "must be a string"),
        ("checked", '{"ttl_days":0}', "params", "must not be zero"),
    ],
)
async def test_validation_errors_name_the_field_and_a_readable_reason(
    method: str, params: str | None, field: str, reason: str
) -> None:
    reply = await serve(memory_table(), call(method, params))
    assert reply["id"] == 1
    assert reply["error"] == {
        "code": -32602,
        "message": f"Invalid params: {field}: {reason}",
        "data": {"field": field, "reason": reason},
    }


async def test_rpc_error_raised_while_validating_params_reaches_the_caller() -> None:
    reply = await serve(memory_table(), call("checked", '{"ttl_days":-1}'))
    assert reply["error"]["data"] == {"field": "ttl_days", "reason": "must be positive"}


async def test_rpc_error_from_a_handler_keeps_its_code_message_and_data() -> None:
    reply = await serve(memory_table(), call("missing", id_='"abc"'))
    assert reply == {
        "jsonrpc": "2.0",
        "error": {"code": -32001, "message": "no such memory", "data": {"memory_id": "01HX"}},
        "id": "abc",
    }


async def test_unexpected_exception_is_an_internal_error_logged_without_params(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="memoryd.rpc")
    reply = await serve(memory_table(), call("broken", "{}", id_="9"))
    assert reply == {
        "jsonrpc": "2.0",
        "error": {"code": -32603, "message": "Internal error"},
        "id": 9,
    }
    [record] = [r for r in caplog.records if r.name == "memoryd.rpc"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
    assert "broken" in record.getMessage()
    # The traceback carries the exception text; the log message itself carries no payload.
    assert "1234" not in record.getMessage()


async def test_result_that_cannot_be_encoded_is_an_internal_error() -> None:
    reply = await serve(memory_table(), call("unencodable"))
    assert reply["error"]["code"] == -32603


async def test_params_nested_too_deeply_for_the_struct_are_invalid_params() -> None:
    table = memory_table()
    deep = b"[" * 5000 + b"]" * 5000
    request = Request(
        method="memory.search",
        params=msgspec.Raw(b'{"user_id":"u","query":"q","metadata":{"x":' + deep + b"}}"),
        id=1,
        is_notification=False,
    )
    reply = await table.dispatch(request, CTX)
    assert reply is not None
    assert json.loads(reply)["error"]["code"] == -32602


async def test_notifications_get_no_reply_even_when_they_fail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = memory_table()
    for text in (
        '{"jsonrpc":"2.0","method":"broken"}',
        '{"jsonrpc":"2.0","method":"missing"}',
        '{"jsonrpc":"2.0","method":"no.such.method"}',
        '{"jsonrpc":"2.0","method":"memory.search","params":{"limit":"x"}}',
        '{"jsonrpc":"2.0","method":"memory.search","params":["u"]}',
    ):
        assert await serve(table, text) is None


async def test_top_level_errors_answer_with_null_id() -> None:
    table = memory_table()
    assert await serve(table, b'{"jsonrpc":"2.0","method":"nothing","params":{"x":"\xff"},"id":1}') == PARSE_ERROR
    assert await serve(table, b"42") == INVALID_REQUEST
    assert await serve(table, b"") == PARSE_ERROR


async def test_invalid_request_with_a_valid_id_is_answered_with_that_id() -> None:
    reply = await serve(memory_table(), '{"jsonrpc":"1.0","method":"nothing","id":"q7"}')
    assert reply == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Invalid Request"},
        "id": "q7",
    }


async def test_batch_calls_run_concurrently_and_replies_keep_request_order(
    autojump_clock: Any,
) -> None:
    table = MethodTable()
    first_done = trio.Event()
    order: list[str] = []

    async def waits(params: NoParams, ctx: CallContext) -> str:
        # Finishes only after the later call did: a serial dispatcher would never return.
        await first_done.wait()
        order.append("waits")
        return "waited"

    async def quick(params: NoParams, ctx: CallContext) -> str:
        await trio.sleep(1)
        order.append("quick")
        first_done.set()
        return "quick"

    table.register("waits", NoParams, waits)
    table.register("quick", NoParams, quick)
    with trio.fail_after(60):
        reply = await serve(
            table,
            '[{"jsonrpc":"2.0","method":"waits","id":1},'
            '{"jsonrpc":"2.0","method":"quick"},'
            '{"jsonrpc":"2.0","method":"quick","id":2},'
            '{"jsonrpc":"2.0","method":7,"id":3}]',
        )
    assert order[-1] == "waits"
    assert reply == [
        {"jsonrpc": "2.0", "result": "waited", "id": 1},
        {"jsonrpc": "2.0", "result": "quick", "id": 2},
        {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": 3},
    ]


async def test_one_failing_call_in_a_batch_does_not_spoil_the_others() -> None:
    reply = await serve(
        memory_table(),
        "[" + call("broken", id_="1") + "," + call("nothing", id_="2") + "]",
    )
    assert [item.get("result", item.get("error")) for item in reply] == [
        {"code": -32603, "message": "Internal error"},
        None,
    ]


async def test_dispatch_returns_the_encoded_reply_for_one_request() -> None:
    table = memory_table()
    request = Request(method="nothing", params=None, id="x", is_notification=False)
    assert await table.dispatch(request, CTX) == b'{"jsonrpc":"2.0","result":null,"id":"x"}'
    notification = Request(method="nothing", params=None, id=None, is_notification=True)
    assert await table.dispatch(notification, CTX) is None


def test_names_lists_registered_methods_in_order() -> None:
    table, _ = spec_table()
    assert table.names() == ["subtract", "sum", "update", "notify_sum", "notify_hello", "get_data"]


def test_registering_a_name_twice_is_refused() -> None:
    table = MethodTable()

    async def handler(params: NoParams, ctx: CallContext) -> None:
        return None

    table.register("a", NoParams, handler)
    with pytest.raises(ValueError):
        table.register("a", NoParams, handler)


def test_params_type_must_be_a_struct() -> None:
    async def handler(params: Any, ctx: CallContext) -> None:
        return None

    table = MethodTable()
    with pytest.raises(TypeError):
        table.register("a", dict, handler)  # type: ignore[arg-type]


def test_call_context_defaults() -> None:
    ctx = CallContext(peer_uid=None, peer_pid=None, peer_gid=None, connection_id=3)
    assert ctx.extras == {}
    assert CallContext(connection_id=4).extras is not ctx.extras
