"""Reading a `memoryd export` file: the header, and each line decoded and validated.

A line is checked with the same validators as ``memory.add`` (``memoryd.service.validation``)
plus what only the file format has (timestamps, counters); a problem becomes a ``LineError``
naming the line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import msgspec

from memoryd.errors import InvalidParams
from memoryd.ids import ms_from_iso
from memoryd.service.validation import check_full_id, check_group_chat, check_text
from memoryd.store.transfer import (
    FORMAT,
    READABLE_VERSIONS,
    VERSION,
    ExportHeader,
    MemoryLine,
)

_header_decoder = msgspec.json.Decoder(ExportHeader)
_line_decoder = msgspec.json.Decoder(MemoryLine)
_TIMESTAMPS = ("created_at", "updated_at", "expires_at", "deleted_at", "expiry_recorded_at", "last_access_at")


class LineError(ValueError):
    """A line of an import file that cannot be imported; ``line`` is 1-based."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


def read_lines(chunks: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line) of a binary file, skipping blank lines."""
    for number, raw in enumerate(chunks, start=1):
        if raw.strip():
            yield number, raw


def parse_header(line_no: int, raw: bytes) -> ExportHeader:
    try:
        header = _header_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise LineError(line_no, f"not a memoryd export header: {exc}") from None
    if header.format != FORMAT:
        raise LineError(line_no, f"format is {header.format!r}, expected {FORMAT!r}")
    if header.version not in READABLE_VERSIONS:
        raise LineError(line_no, f"format version {header.version} is not supported (this memoryd reads up to {VERSION})")
    return header


def parse_line(line_no: int, raw: bytes) -> MemoryLine:
    """Decode and validate one memory line; raises LineError naming the line and the problem."""
    try:
        line = _line_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise LineError(line_no, str(exc)) from None
    try:
        _validate(line)
    except InvalidParams as exc:
        raise LineError(line_no, f"{exc.data['field']} {exc.data['reason']}") from None
    return line


def _validate(line: MemoryLine) -> None:
    check_full_id("id", line.id)
    check_text("content", line.content)
    check_text("owner", line.owner)
    check_text("source", line.source)
    for index, subject in enumerate(line.subjects):
        check_text(f"subjects[{index}]", subject)
    if line.chat_id is not None:
        check_text("chat_id", line.chat_id)
    check_group_chat(line.scope == "group", line.chat_id)
    if line.superseded_by is not None:
        check_full_id("superseded_by", line.superseded_by)
    if not math.isfinite(line.confidence):
        raise InvalidParams.for_field("confidence", "must be a finite number")
    if line.access_count < 0:
        raise InvalidParams.for_field("access_count", "must be >= 0")
    for name in _TIMESTAMPS:
        value = getattr(line, name)
        if value is not None:
            try:
                ms_from_iso(value)
            except ValueError as exc:
                raise InvalidParams.for_field(name, str(exc)) from None
