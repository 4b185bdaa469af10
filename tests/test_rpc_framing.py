"""FrameDecoder: line and length-prefix framing, chosen by the first byte, with a size cap."""

from __future__ import annotations

import pytest

from memoryd.errors import PayloadTooLarge
from memoryd.rpc.framing import FrameDecoder, Framing, encode_frame


def drain(decoder: FrameDecoder) -> list[bytes]:
    messages = []
    while (message := decoder.next_message()) is not None:
        messages.append(message)
    return messages


def prefixed(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize("first", [b"{", b"[", b" ", b"\t", b"\n", b"\r"])
def test_json_start_or_whitespace_selects_line_framing(first: bytes) -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(first)
    assert decoder.framing is Framing.LINES


@pytest.mark.parametrize("first", [b"\x00", b"\x01", b"a", b"\xff", b'"'])
def test_any_other_first_byte_selects_length_prefix(first: bytes) -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(first)
    assert decoder.framing is Framing.LENGTH_PREFIX


def test_framing_is_undecided_until_a_byte_arrives() -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(b"")
    assert decoder.framing is None
    assert decoder.next_message() is None
    assert not decoder.has_partial_frame


def test_framing_stays_fixed_after_the_first_byte() -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(b"{}\n")
    decoder.feed(b"\x00\x00\x00\x02{}")
    assert decoder.framing is Framing.LINES


def test_lines_yield_each_message_in_order() -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(b'{"a":1}\n{"b":2}\n[3]\n')
    assert drain(decoder) == [b'{"a":1}', b'{"b":2}', b"[3]"]
    assert not decoder.has_partial_frame


def test_lines_strip_carriage_return_before_newline() -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(b'{"a":1}\r\n{"b":2}\r\n')
    assert drain(decoder) == [b'{"a":1}', b'{"b":2}']


def test_lines_skip_blank_and_whitespace_only_lines() -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(b'\n\r\n  \t \n{"a":1}\n\n   \n{"b":2}\n\n')
    assert drain(decoder) == [b'{"a":1}', b'{"b":2}']
    assert not decoder.has_partial_frame


def test_line_arriving_byte_by_byte_is_assembled() -> None:
    decoder = FrameDecoder(1 << 20)
    line = b'{"text":"' + b"x" * 20_000 + b'"}'
    for byte in line:
        decoder.feed(bytes([byte]))
        assert decoder.next_message() is None
    assert decoder.has_partial_frame
    decoder.feed(b"\n")
    assert decoder.next_message() == line
    assert not decoder.has_partial_frame


def test_partial_line_is_reported_until_completed() -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(b'{"a":1}\n{"b"')
    assert drain(decoder) == [b'{"a":1}']
    assert decoder.has_partial_frame
    decoder.feed(b":2}\n")
    assert drain(decoder) == [b'{"b":2}']
    assert not decoder.has_partial_frame


def test_trailing_whitespace_is_not_a_partial_frame() -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(b'{"a":1}\n  \r')
    assert drain(decoder) == [b'{"a":1}']
    assert not decoder.has_partial_frame


def test_line_exactly_at_the_cap_is_accepted() -> None:
    decoder = FrameDecoder(10)
    decoder.feed(b"[" + b"1" * 8 + b"]\r\n")
    assert drain(decoder) == [b"[11111111]"]


def test_unterminated_line_over_the_cap_raises_before_the_newline() -> None:
    decoder = FrameDecoder(10)
    decoder.feed(b"[" + b"1" * 9)
    assert decoder.next_message() is None
    decoder.feed(b"1")
    with pytest.raises(PayloadTooLarge):
        decoder.next_message()


def test_line_at_the_cap_waiting_for_newline_after_carriage_return_is_accepted() -> None:
    decoder = FrameDecoder(10)
    decoder.feed(b"[" + b"1" * 8 + b"]\r")
    assert decoder.next_message() is None
    decoder.feed(b"\n")
    assert decoder.next_message() == b"[11111111]"


def test_complete_line_over_the_cap_raises() -> None:
    decoder = FrameDecoder(10)
    decoder.feed(b"[1]\n[" + b"1" * 20 + b"]\n")
    assert decoder.next_message() == b"[1]"
    with pytest.raises(PayloadTooLarge):
        decoder.next_message()


def test_final_line_without_newline_is_available_at_end_of_input() -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(b'{"a":1}\n{"b":2}  ')
    assert drain(decoder) == [b'{"a":1}']
    assert decoder.end_of_input() == b'{"b":2}'
    assert decoder.end_of_input() is None
    assert not decoder.has_partial_frame


def test_length_prefix_yields_each_payload() -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(prefixed(b'{"a":1}') + prefixed(b"[1,2]\n") + prefixed(b"x"))
    assert drain(decoder) == [b'{"a":1}', b"[1,2]\n", b"x"]
    assert not decoder.has_partial_frame


def test_length_prefix_split_inside_header_and_payload() -> None:
    decoder = FrameDecoder(1024)
    frame = prefixed(b'{"method":"x"}')
    for cut in range(1, len(frame)):
        decoder.feed(frame[:cut])
        assert decoder.next_message() is None
        assert decoder.has_partial_frame
        decoder.feed(frame[cut:])
        assert decoder.next_message() == b'{"method":"x"}'
        assert not decoder.has_partial_frame


def test_length_prefix_of_zero_yields_an_empty_payload() -> None:
    decoder = FrameDecoder(1024)
    decoder.feed(b"\x00\x00\x00\x00")
    assert decoder.next_message() == b""


def test_length_prefix_over_the_cap_raises_from_the_header_alone() -> None:
    decoder = FrameDecoder(100)
    decoder.feed((101).to_bytes(4, "big"))
    with pytest.raises(PayloadTooLarge):
        decoder.next_message()


def test_length_prefix_exactly_at_the_cap_is_accepted() -> None:
    decoder = FrameDecoder(100)
    decoder.feed(prefixed(b"a" * 100))
    assert decoder.next_message() == b"a" * 100


def test_end_of_input_in_length_prefix_mode_returns_nothing() -> None:
    decoder = FrameDecoder(100)
    decoder.feed(b"\x00\x00\x00\x05ab")
    assert decoder.end_of_input() is None
    assert decoder.has_partial_frame


@pytest.mark.parametrize("framing", list(Framing))
def test_encode_frame_round_trips_through_the_decoder(framing: Framing) -> None:
    payloads = [b'{"jsonrpc":"2.0","result":null,"id":1}', b"[]", b'{"x":"\\n"}']
    decoder = FrameDecoder(1024)
    decoder.feed(b"".join(encode_frame(framing, payload) for payload in payloads))
    assert decoder.framing is framing
    assert drain(decoder) == payloads


def test_cap_must_be_positive() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(0)
