"""Reading a `memoryd export` file: the header, and each line decoded and validated.

A line is checked with the same validators as ``memory.add`` (``memoryd.service.validation``:
content size, owner and chat ids, subjects and their count, source, key, metadata size) and the
same secrets filter, plus what only the file format has (timestamps, counters); a problem
becomes a ``LineError`` naming the line and the field.  Nothing memory.add would refuse is
imported: a store holding such a memory could fail its owner's every list and search.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import msgspec

from memoryd.errors import InvalidParams
from memoryd.ids import ms_from_iso
from memoryd.secrets import SecretsMode
from memoryd.service.params import DEFAULT_MAX_SUBJECTS, MAX_SUBJECT_BYTES, MAX_SUBJECT_CHARS
from memoryd.service.secret_guard import SecretsGuard
from memoryd.service.validation import (
    check_chars,
    check_full_id,
    check_group_chat,
    check_identity,
    check_memory_fields,
    check_text,
)
from memoryd.store.admin_records import (
    FORMAT,
    READABLE_VERSIONS,
    VERSION,
    ExportHeader,
    MemoryLine,
    PersonLine,
)


class _Record(msgspec.Struct):
    """What kind of line this is: person lines say so, memory lines (all of versions 1-2) do not."""

    record: str = "memory"


_header_decoder = msgspec.json.Decoder(ExportHeader)
_record_decoder = msgspec.json.Decoder(_Record)
_line_decoders: dict[str, msgspec.json.Decoder[MemoryLine] | msgspec.json.Decoder[PersonLine]] = {
    "memory": msgspec.json.Decoder(MemoryLine),
    "person": msgspec.json.Decoder(PersonLine),
}
_TIMESTAMPS = ("created_at", "updated_at", "expires_at", "deleted_at", "expiry_recorded_at", "last_access_at")


@dataclass(frozen=True)
class ImportRules:
    """The configured bounds memory.add applies that an import must apply too."""

    max_subjects: int = DEFAULT_MAX_SUBJECTS
    #: extraction.secrets: "refuse" reports the line; "redact" imports it redacted.
    secrets: SecretsMode = "refuse"


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
        raise LineError(
            line_no, f"format version {header.version} is not supported (this memoryd reads up to {VERSION})"
        )
    return header


def parse_line(line_no: int, raw: bytes, rules: ImportRules = ImportRules()) -> MemoryLine | PersonLine:
    """Decode and validate one memory or person line (a memory line comes back redacted when
    ``rules.secrets`` is "redact" and it holds a secret); raises LineError naming the line and
    the problem."""
    try:
        kind = _record_decoder.decode(raw).record
        decoder = _line_decoders.get(kind)
        if decoder is None:
            raise LineError(line_no, f"record {kind!r} is not one of {sorted(_line_decoders)}")
        line: MemoryLine | PersonLine = decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise LineError(line_no, str(exc)) from None
    try:
        if isinstance(line, PersonLine):
            _validate_person(line)
        else:
            _validate(line, rules.max_subjects)
            line = _screened(line, SecretsGuard(rules.secrets))
    except InvalidParams as exc:
        raise LineError(line_no, f"{exc.data['field']} {exc.data['reason']}") from None
    return line


def _check_name(field: str, value: str) -> str:
    """A person's name or alias as memory.add's subjects and person.alias accept it."""
    return check_chars(field, check_text(field, value, max_bytes=MAX_SUBJECT_BYTES), MAX_SUBJECT_CHARS)


def _validate_person(line: PersonLine) -> None:
    check_full_id("id", line.id)
    check_identity("owner", line.owner)
    _check_name("name", line.name)
    _check_each(_check_name, "aliases", line.aliases)
    if line.relationship is not None:
        _check_name("relationship", line.relationship)
    _check_each(check_full_id, "memories", line.memories)
    _check_timestamps(line, ("created_at", "updated_at"))


def _check_each(check: Callable[[str, str], object], field: str, values: list[str]) -> None:
    for index, value in enumerate(values):
        check(f"{field}[{index}]", value)


def _check_timestamps(line: MemoryLine | PersonLine, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(line, name)
        if value is not None:
            try:
                ms_from_iso(value)
            except ValueError as exc:
                raise InvalidParams.for_field(name, str(exc)) from None


def _validate(line: MemoryLine, max_subjects: int) -> None:
    check_full_id("id", line.id)
    check_identity("owner", line.owner)
    if line.chat_id is not None:
        check_identity("chat_id", line.chat_id)
    check_memory_fields(
        content=line.content,
        source=line.source,
        subjects=line.subjects,
        metadata=line.metadata,
        key=line.key,
        max_subjects=max_subjects,
    )
    check_group_chat(line.scope == "group", line.chat_id)
    if line.superseded_by is not None:
        check_full_id("superseded_by", line.superseded_by)
    if not math.isfinite(line.confidence):
        raise InvalidParams.for_field("confidence", "must be a finite number")
    if line.access_count < 0:
        raise InvalidParams.for_field("access_count", "must be >= 0")
    _check_timestamps(line, _TIMESTAMPS)


def _screened(line: MemoryLine, guard: SecretsGuard) -> MemoryLine:
    """``line`` with the secrets filter applied to every text memory.add screens."""
    if line.source_session is not None:
        guard.screen_identifier("source_session", line.source_session)  # refused in either mode
    changes = {
        "content": guard.screen_add("content", line.content),
        "source": guard.screen_add("source", line.source),
        "subjects": [guard.screen_add(f"subjects[{i}]", s) for i, s in enumerate(line.subjects)],
        "metadata": guard.screen_metadata("metadata", line.metadata),
        "key": None if line.key is None else guard.screen_add("key", line.key),
    }
    if not guard.redacted:
        return line
    return msgspec.structs.replace(line, **changes)
