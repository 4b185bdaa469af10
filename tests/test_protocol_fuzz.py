"""A protocol fuzzer: hypothesis writes messages, good and bad, and the JSON-RPC invariants must hold.

* exactly one reply per request, none per notification, carrying the request's id;
* every error code is one of ``ErrorCode``; -32603 only from the method that crashes on purpose;
* framing: whatever chunks the bytes arrive in, the same payloads come out;
* against a live daemon (a subprocess): the same, then the daemon still answers and still runs.

The budget is small in the suite (a few seconds).  For a long run by hand:
``./dev test tests/test_protocol_fuzz.py --fuzz-long`` (or ``MEMORYD_FUZZ_LONG=1``).
"""

from __future__ import annotations

import json
import os
import socket
from collections import Counter
from typing import Any

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.errors import InvalidParams
from memoryd.rpc.budget import SharedBudget
from memoryd.rpc.connection import Close, ConnectionLimits, RpcConnection, Wait
from memoryd.rpc.dispatch import CallContext, MethodTable, serve_message
from memoryd_client.errors import ErrorCode

LONG = os.environ.get("MEMORYD_FUZZ_LONG") == "1"
CODES = {int(code) for code in ErrorCode}
CTX = CallContext(peer_uid=1000, peer_pid=1, peer_gid=1000, connection_id=1)
FUZZ = settings(
    max_examples=5_000 if LONG else 120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SOCKET_FUZZ = settings(
    max_examples=1_000 if LONG else 40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

# -- what hypothesis writes ---------------------------------------------------------------------

LONE_SURROGATES = st.sampled_from(["\ud800", "a\udfffb", "\udc00x", "\ud83d"])
TEXT = st.one_of(st.text(max_size=12), LONE_SURROGATES)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=12,
)
IDS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(2**63, 2**80),  # past int64: echoed as sent
    st.text(max_size=8),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
    LONE_SURROGATES,
)
METHODS = st.one_of(st.sampled_from(["echo", "echo", "fail", "crash", "missing"]), TEXT)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """A structurally valid request or notification (params may still be bad for the method)."""
    request: dict[str, Any] = {"jsonrpc": "2.0", "method": draw(METHODS)}
    params = draw(st.none() | st.dictionaries(TEXT, JSON_VALUES, max_size=4) | st.lists(JSON_VALUES, max_size=3))
    if params is not None:
        request["params"] = params
    if draw(st.booleans()):
        request["id"] = draw(IDS)
    return request


GARBAGE = st.one_of(
    st.binary(max_size=40).filter(lambda b: b"\n" not in b),
    st.sampled_from(
        [
            b"{",
            b"[]",
            b"[1,2]",
            b"null",
            b'"x"',
            b"{}",
            b'{"jsonrpc":"1.0","method":"echo","id":1}',
            b'{"jsonrpc":"2.0","method":"echo","id":1e400}',
            b'{"jsonrpc":"2.0","method":"echo","id":' + b"9" * 400 + b"}",
            b'{"jsonrpc":"2.0","method":"echo","params":"s","id":2}',
            b"[" * 3000 + b"]" * 3000,
            b'{"jsonrpc":"2.0","method":"echo","id":true}',
            b"\xef\xbb\xbf{}",
            b'{"a":NaN}',
        ]
    ),
)


@st.composite
def payloads(draw: st.DrawFn) -> tuple[bytes, Any]:
    """(payload, what was meant): a request, a batch of them, or garbage (None)."""
    kind = draw(st.sampled_from(["request", "request", "batch", "garbage"]))
    if kind == "request":
        request = draw(requests())
        return json.dumps(request).encode(), request
    if kind == "batch":
        batch = draw(st.lists(requests() | st.just("not a request"), min_size=1, max_size=6))
        return json.dumps(batch).encode(), batch
    return draw(GARBAGE), None


# -- the methods the sans-io fuzz runs against -----------------------------------------------------


class AnyParams(msgspec.Struct):
    content: str = ""


def fuzz_table() -> MethodTable:
    table = MethodTable()

    async def echo(params: AnyParams, ctx: CallContext) -> str:
        return params.content

    async def fail(params: AnyParams, ctx: CallContext) -> None:
        raise InvalidParams.for_field("content", "always wrong")

    async def crash(params: AnyParams, ctx: CallContext) -> None:
        raise RuntimeError("a bug, on purpose")

    table.register("echo", AnyParams, echo)
    table.register("fail", AnyParams, fail)
    table.register("crash", AnyParams, crash)
    return table


TABLE = fuzz_table()

# -- the invariants -------------------------------------------------------------------------------


def has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(v) for v in value)
    return False


def expected_id(request: dict[str, Any]) -> Any:
    """The id the reply must carry: the request's own, or null where it cannot be read."""
    id_ = request.get("id")
    return None if has_lone_surrogate(id_) else id_


def wants_reply(request: Any) -> bool:
    if not isinstance(request, dict):
        return True  # an invalid entry is always answered
    if "id" in request:
        return True
    # A notification is never answered, unless it is not a valid request at all (then there is
    # no telling it was meant as one): a lone surrogate outside its params makes it invalid.
    outside = {k: v for k, v in request.items() if k != "params"}
    return has_lone_surrogate(outside)


def check_reply_object(reply: Any, *, crashed_allowed: bool) -> None:
    assert isinstance(reply, dict) and reply.get("jsonrpc") == "2.0", reply
    assert ("result" in reply) != ("error" in reply), reply
    assert "id" in reply
    if "error" in reply:
        error = reply["error"]
        assert error["code"] in CODES, reply
        assert isinstance(error["message"], str) and error["message"]
        if error["code"] == ErrorCode.INTERNAL_ERROR:
            assert crashed_allowed, reply


def check_answer(meant: Any, raw_reply: bytes | None) -> None:
    """The reply to one payload keeps the invariants of what the payload meant."""
    reply = None if raw_reply is None else json.loads(raw_reply)
    if meant is None:  # garbage: at most one answer, with codes from the table
        for item in reply if isinstance(reply, list) else ([] if reply is None else [reply]):
            check_reply_object(item, crashed_allowed=False)
        return
    batch = meant if isinstance(meant, list) else [meant]
    crashes = any(isinstance(r, dict) and r.get("method") == "crash" for r in batch)
    answered = [r for r in batch if wants_reply(r)]
    if not isinstance(meant, list):
        if not answered:
            assert reply is None, (meant, reply)
            return
        check_reply_object(reply, crashed_allowed=crashes)
        assert reply["id"] == expected_id(meant) or reply["id"] is None and "error" in reply, (meant, reply)
        return
    if not answered:
        assert reply is None, (meant, reply)
        return
    assert isinstance(reply, list) and len(reply) == len(answered), (meant, reply)
    for item in reply:
        check_reply_object(item, crashed_allowed=crashes)
    # Every request with a readable id gets exactly one reply with that id.
    wanted = Counter(json.dumps(expected_id(r)) for r in answered if isinstance(r, dict) and "id" in r)
    got = Counter(json.dumps(item["id"]) for item in reply)
    for key, count in wanted.items():
        if key != "null":
            assert got[key] >= count, (meant, reply)


# -- sans-io: envelope and dispatch, then framing through RpcConnection ----------------------------


@FUZZ
@given(payloads())
def test_every_payload_is_answered_by_the_rules(case: tuple[bytes, Any]) -> None:
    payload, meant = case

    async def run() -> bytes | None:
        return await serve_message(payload, TABLE, CTX, max_batch_calls=100)

    check_answer(meant, trio.run(run))


@FUZZ
@given(st.lists(payloads(), min_size=1, max_size=8), st.data())
def test_framing_hands_out_the_same_payloads_however_the_bytes_are_cut(
    cases: list[tuple[bytes, Any]], data: st.DataObject
) -> None:
    prefixed = data.draw(st.booleans())
    wanted = [payload for payload, _ in cases]
    if prefixed:
        stream = b"".join(len(p).to_bytes(4, "big") + p for p in wanted)
    else:
        # Line framing: a payload is one line; leading/trailing whitespace is not part of it.
        wanted = [p.strip() for p in wanted if b"\n" not in p and b"\r" not in p and p.strip()]
        if not wanted or wanted[0][:1] not in b"{[ \t":
            return  # line mode is chosen by the first byte
        stream = b"".join(p + b"\n" for p in wanted)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(stream) - 1)), max_size=12)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    budget = SharedBudget(10**9)
    connection = RpcConnection(ConnectionLimits(max_message_bytes=1 << 20, max_inflight=1000, idle_timeout=1.0), budget)
    out: list[bytes] = []
    for piece in [*pieces, b""]:
        connection.receive_data(piece)
        while True:
            event = connection.next_event()
            if isinstance(event, bytes):
                out.append(event)
                connection.message_done()
                continue
            break
        if isinstance(event, Close):
            break
        assert event is Wait.NEED_DATA
    assert out == wanted
    assert budget.used == 0


# -- a live daemon --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live_daemon(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One daemon subprocess for the whole socket-level run (its state persists across examples)."""
    import shutil
    import tempfile
    from pathlib import Path

    from tests.conftest import DaemonProcess

    base = Path(tempfile.mkdtemp(prefix="md-fz-", dir="/tmp"))
    process = DaemonProcess(base).start()
    yield process
    assert process.proc is not None and process.proc.poll() is None, "the daemon died during the fuzz"
    process.stop()
    shutil.rmtree(base, ignore_errors=True)


def exchange(path: str, stream: bytes, replies: int) -> list[bytes]:
    """Send ``stream`` on one connection; read ``replies`` lines (then EOF is fine too)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(path)
        sock.sendall(stream)
        data = b""
        while data.count(b"\n") < replies:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    return data.split(b"\n")[:replies]


LIVE_METHODS = st.sampled_from(["system.health", "memory.add", "memory.search", "memory.list", "memory.get", "nope"])


@st.composite
def live_requests(draw: st.DrawFn) -> dict[str, Any]:
    params = draw(
        st.fixed_dictionaries(
            {"user_id": st.sampled_from(["fuzz-a", "fuzz-b"])},
            optional={
                "content": TEXT.filter(lambda t: t.strip()) | JSON_VALUES,
                "query": TEXT,
                "limit": st.integers(-5, 2**64),
                "offset": st.integers(-5, 2**64),
                "memory_id": TEXT,
                "subjects": st.lists(TEXT, max_size=3),
            },
        )
    )
    request: dict[str, Any] = {"jsonrpc": "2.0", "method": draw(LIVE_METHODS), "params": params}
    if draw(st.integers(0, 4)):
        request["id"] = draw(IDS.filter(lambda i: i is not None))
    return request


@SOCKET_FUZZ
@given(
    st.lists(
        live_requests() | payloads().map(lambda case: case[1] if case[1] is not None else case[0]),
        min_size=1,
        max_size=6,
    )
)
def test_a_live_daemon_keeps_the_rules_and_stays_up(live_daemon: Any, messages: list[Any]) -> None:
    lines: list[bytes] = []
    meant: list[Any] = []
    for message in messages:
        payload = message if isinstance(message, bytes) else json.dumps(message).encode()
        if b"\n" in payload or not payload.strip():
            continue
        lines.append(payload)
        meant.append(None if isinstance(message, bytes) else message)
    if not lines or lines[0].lstrip()[:1] not in (b"{", b"["):
        return  # line framing only (the first byte decides the framing)
    expected = sum(
        1
        for m in meant
        if m is None
        or (isinstance(m, list) and any(wants_reply(r) for r in m))
        or (isinstance(m, dict) and wants_reply(m))
    )
    replies = exchange(str(live_daemon.socket), b"\n".join(lines) + b"\n", expected)
    # One line per answered payload (garbage included: it is always answered), nothing lost.
    assert len([raw for raw in replies if raw]) == expected, (messages, replies)
    by_id: dict[str, Any] = {}
    for raw in replies:
        if raw:
            answer = json.loads(raw)
            for item in answer if isinstance(answer, list) else [answer]:
                check_reply_object(item, crashed_allowed=False)
                by_id[json.dumps(item["id"])] = item
    for m in meant:
        if isinstance(m, dict) and "id" in m and expected_id(m) is not None:
            assert json.dumps(expected_id(m)) in by_id, (m, replies)
    health = json.loads(exchange(str(live_daemon.socket), b'{"jsonrpc":"2.0","method":"system.health","id":0}\n', 1)[0])
    assert health["result"]["status"] == "ok"
