"""parse_message and the reply encoders: the JSON-RPC 2.0 envelope without any I/O."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from memoryd.errors import InvalidParams, InvalidRequest, NotFound, ParseError
from memoryd.rpc.envelope import (
    BadCall,
    Request,
    encode_batch,
    encode_error,
    encode_result,
    parse_message,
)


def single(payload: bytes) -> Request | BadCall:
    message = parse_message(payload)
    assert not message.is_batch
    assert len(message.calls) == 1
    return message.calls[0]


def test_request_is_parsed_with_raw_params_kept_verbatim() -> None:
    call = single(b'{"jsonrpc":"2.0","method":"memory.add","params":{"content": "a b" },"id":7}')
    assert isinstance(call, Request)
    assert call.method == "memory.add"
    assert call.id == 7
    assert not call.is_notification
    assert isinstance(call.params, msgspec.Raw)
    assert bytes(call.params) == b'{"content": "a b" }'


def test_request_without_id_is_a_notification() -> None:
    call = single(b'{"jsonrpc":"2.0","method":"ping"}')
    assert isinstance(call, Request)
    assert call.is_notification
    assert call.id is None
    assert call.params is None


def test_request_with_null_id_is_not_a_notification() -> None:
    call = single(b'{"jsonrpc":"2.0","method":"ping","id":null}')
    assert isinstance(call, Request)
    assert not call.is_notification
    assert call.id is None


@pytest.mark.parametrize(
    "raw_id, expected",
    [(b'"abc"', "abc"), (b"0", 0), (b"-12", -12), (b"1.5", 1.5), (b'""', ""), (b"1e3", 1000.0)],
)
def test_string_and_number_ids_are_accepted(raw_id: bytes, expected: Any) -> None:
    call = single(b'{"jsonrpc":"2.0","method":"m","id":' + raw_id + b"}")
    assert isinstance(call, Request)
    assert call.id == expected
    assert type(call.id) is type(expected)


def test_integer_id_beyond_64_bits_round_trips() -> None:
    big = 10**30
    call = single(b'{"jsonrpc":"2.0","method":"m","id":%d}' % big)
    assert isinstance(call, Request)
    assert call.id == big
    assert json.loads(encode_result(call.id, 1))["id"] == big


@pytest.mark.parametrize("raw_id", [b"true", b"false", b"{}", b'{"a":1}', b"[]", b"[1]"])
def test_bool_object_and_array_ids_are_invalid_and_answered_with_null_id(raw_id: bytes) -> None:
    call = single(b'{"jsonrpc":"2.0","method":"m","id":' + raw_id + b"}")
    assert isinstance(call, BadCall)
    assert call.id is None
    assert isinstance(call.error, InvalidRequest)


@pytest.mark.parametrize(
    "body",
    [
        b'"method":"m"',
        b'"jsonrpc":"1.0","method":"m"',
        b'"jsonrpc":2.0,"method":"m"',
        b'"jsonrpc":"2.0 ","method":"m"',
        b'"jsonrpc":"2.0"',
        b'"jsonrpc":"2.0","method":1',
        b'"jsonrpc":"2.0","method":null',
        b'"jsonrpc":"2.0","method":["m"]',
        b'"jsonrpc":"2.0","method":"m","params":"bar"',
        b'"jsonrpc":"2.0","method":"m","params":3',
        b'"jsonrpc":"2.0","method":"m","params":null',
        b'"jsonrpc":"2.0","method":"m","params":true',
    ],
)
def test_malformed_request_keeps_its_valid_id(body: bytes) -> None:
    call = single(b"{" + body + b',"id":"k1"}')
    assert isinstance(call, BadCall)
    assert call.id == "k1"
    assert isinstance(call.error, InvalidRequest)


def test_malformed_notification_still_gets_an_error_entry() -> None:
    call = single(b'{"jsonrpc":"2.0","method":1,"params":"bar"}')
    assert isinstance(call, BadCall)
    assert call.id is None


def test_array_params_pass_the_envelope() -> None:
    call = single(b'{"jsonrpc":"2.0","method":"m","params":[1,2],"id":1}')
    assert isinstance(call, Request)
    assert call.params is not None and bytes(call.params) == b"[1,2]"


def test_unknown_members_are_ignored() -> None:
    call = single(b'{"jsonrpc":"2.0","method":"m","id":1,"extra":{"x":[1]}}')
    assert isinstance(call, Request)


def test_escaped_nul_inside_strings_is_legal_json() -> None:
    call = single(b'{"jsonrpc":"2.0","method":"m","params":{"content":"a\\u0000b"},"id":"\\u0000"}')
    assert isinstance(call, Request)
    assert call.id == "\x00"


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"   ",
        b"{",
        b'{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]',
        b'{"jsonrpc":"2.0","method":"m",}',
        b"{'jsonrpc':'2.0'}",
        b'{"jsonrpc":"2.0","method":"m"} {"x":1}',
        b'{"jsonrpc":"2.0","method":"m","id":1}\x00',
        b'{"jsonrpc":"2.0","method":"a\x00b","id":1}',  # a raw control character is not JSON
        b"\xef\xbb\xbf{}",
        b"NaN",
        b'{"jsonrpc":"2.0","method":"m","id":true, garbage}',
        b'{"jsonrpc":1,"method":"m","id":3',
        b'{"jsonrpc":"2.0","method":7,"id":3} trailing',
        b"1 garbage",
        b'"unterminated',
        b"tru",
        b'[{"jsonrpc":"2.0","method":"m","id":1}, {"a": tru}]',
        b'[{"jsonrpc":"2.0","method":"m","id":1}',
    ],
)
def test_not_json_is_a_parse_error(payload: bytes) -> None:
    with pytest.raises(ParseError):
        parse_message(payload)


@pytest.mark.parametrize(
    "payload",
    [
        b'{"jsonrpc":"2.0","method":"\xff","id":1}',
        b'{"jsonrpc":"2.0","method":"m","params":{"content":"\xc3"},"id":1}',
        b'{"jsonrpc":"2.0","method":"m","params":{"\xfe":1},"id":1}',
        b'{"jsonrpc":"2.0","method":"m","id":1,"unknown":"\xc0\xaf"}',
        b'{"jsonrpc":"2.0","method":"m","params":["\xed\xa0\x80"],"id":1}',  # encoded surrogate
        b'{"jsonrpc":"2.0","method":"m","params":["\xf4\x90\x80\x80"],"id":1}',  # > U+10FFFF
        b'[{"jsonrpc":"2.0","method":"m","params":["\x80"],"id":1}]',
    ],
)
def test_invalid_utf8_anywhere_is_a_parse_error(payload: bytes) -> None:
    with pytest.raises(ParseError):
        parse_message(payload)


def test_valid_multibyte_utf8_is_accepted() -> None:
    call = single('{"jsonrpc":"2.0","method":"m","params":{"c":"Zoë 🧠 日本"},"id":1}'.encode())
    assert isinstance(call, Request)


@pytest.mark.parametrize(
    "where",
    [
        lambda deep: b'{"jsonrpc":"2.0","method":"m","params":{"x":%s},"id":1}' % deep,
        lambda deep: b'{"jsonrpc":"2.0","method":"m","id":%s}' % deep,
        lambda deep: b'{"jsonrpc":"2.0","method":"m","id":1,"junk":%s}' % deep,
        lambda deep: b"[%s]" % deep,
        lambda deep: deep,
    ],
)
def test_absurd_nesting_is_a_parse_error_not_a_crash(where: Any) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(ParseError):
        parse_message(where(deep))


def test_moderate_nesting_in_params_is_fine() -> None:
    nested = b"[" * 200 + b"]" * 200
    call = single(b'{"jsonrpc":"2.0","method":"m","params":{"x":%s},"id":1}' % nested)
    assert isinstance(call, Request)


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"9" * 5000, b"1" * 5000 + b".5"])
def test_number_too_big_for_an_id_is_an_invalid_request_echoing_the_id(number: bytes) -> None:
    for payload in (
        b'{"jsonrpc":"2.0","method":"m","id":%s}' % number,
        b'[{"jsonrpc":"2.0","method":"m","id":%s}]' % number,
    ):
        [call] = parse_message(payload).calls
        assert isinstance(call, BadCall)
        assert isinstance(call.error, InvalidRequest)
        # Echoed as sent: the client can still match the answer to its request.
        assert encode_error(call.id, call.error).endswith(b'"id":%s}' % number)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (b'{"content":"a\\ud800b"}', "content"),
        (b'{"content":"ok","subjects":["x","\\udfff"]}', "subjects[1]"),
        (b'{"metadata":{"k":"\\ud83d"}}', "metadata.k"),
        (b'["\\udc00"]', "params[0]"),
    ],
)
def test_lone_surrogate_in_params_is_invalid_params_naming_the_field(params: bytes, field: str) -> None:
    for payload, batch in (
        (b'{"jsonrpc":"2.0","method":"m","params":%s,"id":7}' % params, False),
        (b'[{"jsonrpc":"2.0","method":"n","id":1},{"jsonrpc":"2.0","method":"m","params":%s,"id":7}]' % params, True),
    ):
        message = parse_message(payload)
        call = message.calls[-1]
        assert isinstance(call, BadCall) and call.id == 7
        assert isinstance(call.error, InvalidParams) and call.error.data["field"] == field
        if batch:  # the clean neighbour is untouched
            assert isinstance(message.calls[0], Request) and message.calls[0].id == 1


def test_lone_surrogate_outside_params_is_an_invalid_request_with_the_id() -> None:
    [call] = parse_message(b'{"jsonrpc":"2.0","method":"m\\ud800","id":"a"}').calls
    assert isinstance(call, BadCall) and call.id == "a" and isinstance(call.error, InvalidRequest)
    # In the id itself: there is no id to answer with.
    [call] = parse_message(b'{"jsonrpc":"2.0","method":"m","id":"\\ud800"}').calls
    assert isinstance(call, BadCall) and call.id is None and isinstance(call.error, InvalidRequest)


def test_a_valid_surrogate_pair_is_text() -> None:
    call = single(b'{"jsonrpc":"2.0","method":"m","params":{"content":"\\ud83d\\ude00"},"id":1}')
    assert isinstance(call, Request)


@pytest.mark.parametrize("number", [b"1e400", b"9" * 5000, b"1e-400", b"0." + b"0" * 5000 + b"1"])
def test_huge_numbers_in_params_are_left_to_the_method(number: bytes) -> None:
    call = single(b'{"jsonrpc":"2.0","method":"m","params":[%s],"id":1}' % number)
    assert isinstance(call, Request)


@pytest.mark.parametrize("payload", [b"1", b'"x"', b"null", b"true", b"3.5"])
def test_top_level_scalar_is_an_invalid_request(payload: bytes) -> None:
    with pytest.raises(InvalidRequest):
        parse_message(payload)


def test_empty_batch_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequest):
        parse_message(b" [ ] ")


def test_batch_keeps_order_and_isolates_bad_entries() -> None:
    message = parse_message(
        b'[{"jsonrpc":"2.0","method":"a","id":1},'
        b" 1,"
        b' {"jsonrpc":"2.0","method":"b"},'
        b' {"foo":"boo"},'
        b' [{"jsonrpc":"2.0","method":"nested","id":9}],'
        b' {"jsonrpc":"2.0","method":"c","id":true},'
        b' {"jsonrpc":"2.0","method":2,"id":"x"}]'
    )
    assert message.is_batch
    kinds = [(type(call).__name__, call.id) for call in message.calls]
    assert kinds == [
        ("Request", 1),
        ("BadCall", None),
        ("Request", None),
        ("BadCall", None),
        ("BadCall", None),
        ("BadCall", None),
        ("BadCall", "x"),
    ]
    notification = message.calls[2]
    assert isinstance(notification, Request) and notification.is_notification


def test_batch_of_one_is_still_a_batch() -> None:
    message = parse_message(b'[{"jsonrpc":"2.0","method":"a","id":1}]')
    assert message.is_batch
    assert len(message.calls) == 1


class Hit(msgspec.Struct):
    id: str
    score: float


@pytest.mark.parametrize(
    "result, expected",
    [
        (None, None),
        (19, 19),
        ("x", "x"),
        ([1, "a"], [1, "a"]),
        ({"ok": True}, {"ok": True}),
        (Hit("01H", 0.5), {"id": "01H", "score": 0.5}),
        ([Hit("a", 1.0)], [{"id": "a", "score": 1.0}]),
    ],
)
def test_encode_result_always_sends_the_result_member(result: Any, expected: Any) -> None:
    assert json.loads(encode_result("r1", result)) == {
        "jsonrpc": "2.0",
        "result": expected,
        "id": "r1",
    }


def test_encode_result_with_null_id() -> None:
    assert json.loads(encode_result(None, 1)) == {"jsonrpc": "2.0", "result": 1, "id": None}


def test_encode_error_omits_data_when_there_is_none() -> None:
    assert json.loads(encode_error(3, NotFound())) == {
        "jsonrpc": "2.0",
        "error": {"code": -32001, "message": "Not found"},
        "id": 3,
    }


def test_encode_error_carries_data() -> None:
    err = InvalidParams.for_field("limit", "must be >= 1")
    assert json.loads(encode_error(None, err)) == {
        "jsonrpc": "2.0",
        "error": {
            "code": -32602,
            "message": "Invalid params: limit: must be >= 1",
            "data": {"field": "limit", "reason": "must be >= 1"},
        },
        "id": None,
    }


def test_encoded_replies_contain_no_raw_newline() -> None:
    reply = encode_result(1, {"text": "line one\nline two\r\n", "nul": "\x00"})
    assert b"\n" not in reply and b"\r" not in reply
    assert json.loads(reply)["result"]["nul"] == "\x00"


def test_encode_batch_joins_replies_as_a_json_array() -> None:
    items = [encode_result(1, 1), encode_error(None, InvalidRequest())]
    assert json.loads(encode_batch(items)) == [json.loads(item) for item in items]
    assert json.loads(encode_batch([encode_result(1, None)])) == [{"jsonrpc": "2.0", "result": None, "id": 1}]
