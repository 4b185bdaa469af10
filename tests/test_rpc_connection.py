"""RpcConnection, the sans-io protocol state of one connection: bytes in, events out, no sockets."""

from __future__ import annotations

import json
import math
import struct

import pytest

from memoryd.rpc.budget import SharedBudget
from memoryd.rpc.connection import Close, CloseReason, ConnectionLimits, RpcConnection, Wait
from memoryd.rpc.framing import Framing

LIMITS = ConnectionLimits(max_message_bytes=100, max_inflight=4, idle_timeout=300.0, shutdown_linger=0.25)


def events(connection: RpcConnection) -> list[bytes | Wait | Close]:
    """Every event up to the first wait or close."""
    out: list[bytes | Wait | Close] = []
    while True:
        event = connection.next_event()
        out.append(event)
        if not isinstance(event, bytes):
            return out


def error_code(framed: bytes) -> int:
    reply = json.loads(framed)
    assert reply["id"] is None
    code: int = reply["error"]["code"]
    return code


def test_nothing_happens_before_the_first_byte() -> None:
    connection = RpcConnection(LIMITS)
    assert connection.framing is None
    assert connection.next_event() is Wait.NEED_DATA
    assert connection.frame(b"{}") == b"{}\n"  # a reply before any byte goes out as a line


def test_lines_are_handed_out_whole_and_replies_framed_as_lines() -> None:
    connection = RpcConnection(LIMITS)
    connection.receive_data(b'{"a":1}\n\n  \n{"b"')
    assert events(connection) == [b'{"a":1}', Wait.NEED_DATA]
    connection.receive_data(b":2}\r\n")
    assert events(connection) == [b'{"b":2}', Wait.NEED_DATA]
    assert connection.framing is Framing.LINES
    assert connection.in_flight == 2
    assert connection.frame(b'{"r":1}') == b'{"r":1}\n'


def test_a_message_arriving_byte_by_byte_comes_out_once() -> None:
    connection = RpcConnection(LIMITS)
    for byte in b'{"jsonrpc":"2.0"}\n':
        assert connection.next_event() is Wait.NEED_DATA
        connection.receive_data(bytes([byte]))
    assert events(connection) == [b'{"jsonrpc":"2.0"}', Wait.NEED_DATA]


def test_length_prefixed_messages_get_length_prefixed_replies() -> None:
    connection = RpcConnection(LIMITS)
    connection.receive_data(struct.pack(">I", 7) + b'{"a":1}' + struct.pack(">I", 2))
    assert events(connection) == [b'{"a":1}', Wait.NEED_DATA]
    assert connection.framing is Framing.LENGTH_PREFIX
    assert connection.frame(b"{}") == b"\x00\x00\x00\x02{}"


def test_past_max_inflight_it_waits_for_a_slot_then_goes_on() -> None:
    connection = RpcConnection(ConnectionLimits(max_message_bytes=100, max_inflight=2, idle_timeout=1.0))
    connection.receive_data(b"[1]\n[2]\n[3]\n")
    assert events(connection) == [b"[1]", b"[2]", Wait.SLOT]
    assert connection.next_event() is Wait.SLOT  # still full
    connection.message_done()
    # Full again: it reads no further (bytes wait in the socket, not in our buffer).
    assert events(connection) == [b"[3]", Wait.SLOT]
    connection.message_done()
    assert events(connection) == [Wait.NEED_DATA]


@pytest.mark.parametrize("framing", ["lines", "prefix"])
def test_an_oversized_frame_is_answered_in_kind_and_closes_after_the_messages_before_it(framing: str) -> None:
    connection = RpcConnection(LIMITS)
    if framing == "lines":
        connection.receive_data(b"[1]\n" + b"x" * 101)
    else:
        connection.receive_data(struct.pack(">I", 3) + b"[1]" + struct.pack(">I", 101))
    first, close = events(connection)
    assert first == b"[1]"
    assert isinstance(close, Close) and close.reason is CloseReason.TOO_LARGE
    assert close.reply is not None
    body = close.reply[:-1] if framing == "lines" else close.reply[4:]
    assert error_code(body) == -32004
    assert json.loads(body)["error"]["data"] == {"max_message_bytes": 100}
    # Closed for good: more bytes change nothing, and the message already handed out still counts.
    connection.receive_data(b"[2]\n")
    assert connection.next_event() is close
    assert connection.in_flight == 1


def test_an_unterminated_line_is_refused_as_soon_as_it_passes_the_limit() -> None:
    connection = RpcConnection(LIMITS)
    connection.receive_data(b"[" + b"1," * 40)
    assert connection.next_event() is Wait.NEED_DATA
    connection.receive_data(b"1," * 20)
    close = connection.next_event()
    assert isinstance(close, Close) and close.reason is CloseReason.TOO_LARGE


def test_at_end_of_input_a_last_line_without_newline_still_counts() -> None:
    connection = RpcConnection(LIMITS)
    connection.receive_data(b'[1]\n{"last":true}  ')
    connection.receive_data(b"")
    assert events(connection) == [b"[1]", b'{"last":true}', Close(CloseReason.END_OF_INPUT)]


@pytest.mark.parametrize("rest", [b"", b"\n", b"  \r\n\t "])
def test_end_of_input_with_nothing_left_just_closes(rest: bytes) -> None:
    connection = RpcConnection(LIMITS)
    connection.receive_data(b"[1]\n" + rest)
    connection.receive_data(b"")
    assert events(connection) == [b"[1]", Close(CloseReason.END_OF_INPUT)]


def test_an_oversized_last_line_at_end_of_input_is_answered_too_large() -> None:
    connection = RpcConnection(ConnectionLimits(max_message_bytes=10, max_inflight=4, idle_timeout=1.0))
    connection.receive_data(b"[" + b"1" * 9)  # 10 bytes: under the limit while it might still grow
    assert connection.next_event() is Wait.NEED_DATA
    connection.receive_data(b"]")
    connection.receive_data(b"")
    close = connection.next_event()
    assert isinstance(close, Close) and close.reason is CloseReason.TOO_LARGE
    assert close.reply is not None and error_code(close.reply) == -32004


def test_a_partial_length_prefixed_frame_at_end_of_input_is_dropped() -> None:
    connection = RpcConnection(LIMITS)
    connection.receive_data(struct.pack(">I", 50) + b'{"half')
    connection.receive_data(b"")
    assert events(connection) == [Close(CloseReason.END_OF_INPUT)]


def test_end_of_input_while_slots_are_full_closes_once_one_frees() -> None:
    connection = RpcConnection(ConnectionLimits(max_message_bytes=100, max_inflight=1, idle_timeout=1.0))
    connection.receive_data(b"[1]\n[2]")
    connection.receive_data(b"")
    assert events(connection) == [b"[1]", Wait.SLOT]
    connection.message_done()
    assert events(connection) == [b"[2]", Wait.SLOT]
    connection.message_done()
    assert events(connection) == [Close(CloseReason.END_OF_INPUT)]


def test_only_an_idle_connection_has_a_read_deadline() -> None:
    connection = RpcConnection(LIMITS)
    assert connection.read_deadline(1000.0) == 1300.0
    connection.receive_data(b"[1]\n")
    assert connection.next_event() == b"[1]"
    assert connection.read_deadline(1000.0) == math.inf  # a running call's deadline is not ours
    connection.message_done()
    assert connection.read_deadline(1010.0) == 1310.0


def test_an_idle_connection_that_times_out_closes() -> None:
    connection = RpcConnection(LIMITS)
    connection.read_timed_out()
    assert events(connection) == [Close(CloseReason.IDLE)]


def test_a_wait_that_ends_before_the_deadline_that_moved_later_does_not_close() -> None:
    connection = RpcConnection(LIMITS)
    assert connection.read_deadline(1000.0) == 1300.0
    connection.receive_data(b"[1]\n")
    assert connection.next_event() == b"[1]"
    connection.message_done()
    # The driver waited until 1300; a message since restarted the idle clock at 1100.
    assert connection.read_deadline(1100.0) == 1400.0
    connection.read_wait_ended(1300.0)
    assert events(connection) == [Wait.NEED_DATA]
    connection.read_wait_ended(1400.0)
    assert events(connection) == [Close(CloseReason.IDLE)]


def test_during_shutdown_it_keeps_reading_until_quiet_for_the_linger_time() -> None:
    connection = RpcConnection(LIMITS)
    connection.receive_data(b"[1]\n")
    assert connection.next_event() == b"[1]"
    connection.begin_shutdown()
    assert connection.read_deadline(50.0) == math.inf  # its reply is still to come
    connection.message_done()
    assert connection.read_deadline(50.0) == 50.25
    # A request already on the wire as shutdown began is still handed out (and answered).
    connection.receive_data(b"[2]\n")
    assert events(connection) == [b"[2]", Wait.NEED_DATA]
    connection.message_done()
    connection.read_timed_out()
    assert events(connection) == [Close(CloseReason.SHUTDOWN)]


def test_the_shutdown_linger_counts_from_when_the_connection_went_quiet() -> None:
    # The driver asks again every time its wait ends; a deadline measured from each ask would
    # never pass, and an idle client would hold the server until shutdown_grace ran out.
    connection = RpcConnection(LIMITS)
    connection.begin_shutdown()
    assert connection.read_deadline(50.0) == 50.25
    assert connection.read_deadline(50.25) == 50.25
    assert connection.read_deadline(60.0) == 50.25
    # A message read during shutdown starts the quiet period again once it is done.
    connection.receive_data(b"[1]\n")
    assert connection.next_event() == b"[1]"
    assert connection.read_deadline(61.0) == math.inf
    connection.message_done()
    assert connection.read_deadline(62.0) == 62.25
    assert connection.read_deadline(63.0) == 62.25


@pytest.mark.parametrize(
    "values",
    [
        {"max_message_bytes": 0, "max_inflight": 1, "idle_timeout": 1.0},
        {"max_message_bytes": 1, "max_inflight": 0, "idle_timeout": 1.0},
        {"max_message_bytes": 1, "max_inflight": 1, "idle_timeout": 0.0},
        {"max_message_bytes": 1, "max_inflight": 1, "idle_timeout": 1.0, "shutdown_linger": -1.0},
    ],
)
def test_limits_must_be_positive(values: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ConnectionLimits(**values)  # type: ignore[arg-type]


# -- time and memory bounds --------------------------------------------------------------------

BOUNDED = ConnectionLimits(max_message_bytes=1000, max_inflight=4, idle_timeout=300.0, frame_timeout=5.0)


def test_a_started_frame_has_a_deadline_that_more_bytes_do_not_move() -> None:
    connection = RpcConnection(BOUNDED)
    connection.receive_data(b'{"jsonrpc"')
    assert events(connection) == [Wait.NEED_DATA]
    assert connection.read_deadline(100.0) == 105.0
    for now in (101.0, 102.0, 104.0):  # a byte each time: the deadline stays
        connection.receive_data(b" ")
        assert events(connection) == [Wait.NEED_DATA]
        assert connection.read_deadline(now) == 105.0
    connection.read_timed_out()
    close = connection.next_event()
    assert isinstance(close, Close) and close.reason is CloseReason.FRAME_TIMEOUT
    assert close.reply is not None
    reply = json.loads(close.reply)
    assert reply["id"] is None and reply["error"]["code"] == -32005
    assert reply["error"]["data"] == {"limit": "frame_timeout", "frame_timeout_seconds": 5.0}


def test_a_frame_deadline_applies_while_messages_run() -> None:
    connection = RpcConnection(BOUNDED)
    connection.receive_data(b'{"a":1}\n{"b"')
    assert events(connection) == [b'{"a":1}', Wait.NEED_DATA]
    assert connection.read_deadline(10.0) == 15.0  # not inf: the half frame has its own clock


def test_the_frame_clock_restarts_with_each_message() -> None:
    connection = RpcConnection(BOUNDED)
    connection.receive_data(b'{"a"')
    assert connection.read_deadline(0.0) == 5.0
    connection.receive_data(b':1}\n{"b"')
    assert events(connection) == [b'{"a":1}', Wait.NEED_DATA]
    assert connection.read_deadline(4.0) == 9.0


def test_idle_time_counts_from_the_last_message_not_the_last_byte() -> None:
    connection = RpcConnection(BOUNDED)
    assert connection.read_deadline(0.0) == 300.0
    connection.receive_data(b"\n")  # a keep-alive newline is no message
    assert events(connection) == [Wait.NEED_DATA]
    assert connection.read_deadline(200.0) == 300.0
    connection.receive_data(b'{"a":1}\n')
    assert events(connection) == [b'{"a":1}', Wait.NEED_DATA]
    assert connection.read_deadline(250.0) == math.inf
    connection.message_done()
    assert connection.read_deadline(260.0) == 560.0


def test_an_unfinished_frame_that_finds_the_shared_budget_spent_is_refused_and_closed() -> None:
    budget = SharedBudget(1000)
    first, second = RpcConnection(BOUNDED, budget), RpcConnection(BOUNDED, budget)
    first.receive_data(b"[" + b" " * 799)
    assert events(first) == [Wait.NEED_DATA]
    assert budget.used == 800
    second.receive_data(b"{" + b" " * 299)  # 1100 bytes held: over the budget
    close = second.next_event()
    assert isinstance(close, Close) and close.reason is CloseReason.OVER_BUDGET
    assert close.reply is not None and json.loads(close.reply)["error"]["code"] == -32003
    assert budget.used == 800  # the refused frame's bytes are given back at once
    first.discard_buffers()
    assert budget.used == 0


def test_complete_messages_give_their_bytes_back_to_the_budget() -> None:
    budget = SharedBudget(10_000)
    connection = RpcConnection(BOUNDED, budget)
    connection.receive_data(b'{"a":1}\n{"b":2}\n{"c"')
    assert events(connection) == [b'{"a":1}', b'{"b":2}', Wait.NEED_DATA]
    assert budget.used == len(b'{"c"')
    connection.discard_buffers()
    assert budget.used == 0


def test_replies_are_charged_to_the_connection_share_and_the_shared_budget() -> None:
    budget = SharedBudget(150)
    connection = RpcConnection(
        ConnectionLimits(max_message_bytes=10, max_inflight=4, idle_timeout=1.0, max_reply_bytes=100), budget
    )
    assert connection.replies.take(60) is None
    too_large = connection.replies.take(60)  # 120 > max_reply_bytes
    assert too_large is not None and too_large.code == -32004 and too_large.data["limit"] == "max_reply_bytes"
    other = RpcConnection(
        ConnectionLimits(max_message_bytes=10, max_inflight=4, idle_timeout=1.0, max_reply_bytes=100), budget
    )
    full = other.replies.take(100)  # 160 > the shared 150
    assert full is not None and full.code == -32003 and full.data["limit"] == "max_buffered_bytes"
    connection.replies.release(60)
    assert budget.used == 0 and other.replies.take(100) is None


def test_after_a_stalled_send_the_messages_still_buffered_are_not_run() -> None:
    connection = RpcConnection(LIMITS)
    connection.receive_data(b"[1]\n[2]\n[3]\n")
    assert connection.next_event() == b"[1]"
    connection.send_stalled()  # the reply to [1] went nowhere: the peer reads nothing
    assert connection.next_event() == Close(CloseReason.STALLED)
    connection.message_done()
    assert connection.next_event() == Close(CloseReason.STALLED)
