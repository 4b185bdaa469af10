"""Checks of caller input that msgspec's types cannot express; each raises InvalidParams
naming the field.  The one place these rules live: the memory.* methods use them, and so does
`memoryd import` (``memoryd.admin.import_file``) for the lines of an export file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from memoryd.errors import InvalidParams
from memoryd.ids import MIN_PREFIX_LENGTH, ULID_LENGTH, is_id_prefix, normalize_id_prefix
from memoryd.service.params import (
    MAX_CONTENT_BYTES,
    MAX_KEY_CHARS,
    MAX_METADATA_BYTES,
    MAX_SOURCE_BYTES,
    MAX_SOURCE_CHARS,
    MAX_SUBJECT_BYTES,
    MAX_SUBJECT_CHARS,
)
from memoryd_client.identifiers import identifier_problem

NOT_AN_ID = f"is not a memory id ({ULID_LENGTH} characters, 0-9 and A-Z)"


def check_text(field: str, value: str, *, max_bytes: int | None = None, allow_blank: bool = False) -> str:
    """Reject blank text, NUL characters, lone surrogates and more than ``max_bytes`` of UTF-8."""
    if not allow_blank and not value.strip():
        raise InvalidParams.for_field(field, "must not be empty")
    if "\x00" in value:
        raise InvalidParams.for_field(field, "must not contain NUL characters")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidParams.for_field(field, "must be valid Unicode (it has a lone surrogate)") from None
    if max_bytes is not None and size > max_bytes:
        raise InvalidParams.for_field(field, f"must be at most {max_bytes} bytes of UTF-8 (got {size})")
    return value


def check_chars(field: str, value: str, max_chars: int) -> str:
    if len(value) > max_chars:
        raise InvalidParams.for_field(field, f"must be at most {max_chars} characters (got {len(value)})")
    return value


def check_identity(field: str, value: str) -> str:
    """A user or chat id, by the one identifier rule the daemon, client, CLI and token minting
    share (``memoryd_client.identifiers``)."""
    problem = identifier_problem(value)
    if problem is not None:
        raise InvalidParams.for_field(field, problem)
    return value


def check_memory_fields(
    *,
    content: str,
    source: str,
    subjects: Sequence[str],
    metadata: Mapping[str, Any],
    key: str | None,
    max_subjects: int,
) -> None:
    """What memory.add accepts of a new memory's own fields; ``memoryd import`` checks each
    line of a file with the same function, so an import never stores what memory.add refuses."""
    check_text("content", content, max_bytes=MAX_CONTENT_BYTES)
    check_chars("source", check_text("source", source, max_bytes=MAX_SOURCE_BYTES), MAX_SOURCE_CHARS)
    if len(subjects) > max_subjects:
        raise InvalidParams.for_field(
            "subjects", f"must hold at most {max_subjects} names (limits.max_subjects_per_memory; got {len(subjects)})"
        )
    for index, subject in enumerate(subjects):
        field = f"subjects[{index}]"
        check_chars(field, check_text(field, subject, max_bytes=MAX_SUBJECT_BYTES), MAX_SUBJECT_CHARS)
    size = len(msgspec.json.encode(metadata))
    if size > MAX_METADATA_BYTES:
        raise InvalidParams.for_field("metadata", f"must encode to at most {MAX_METADATA_BYTES} bytes (got {size})")
    if key is not None:
        check_chars("key", check_text("key", key, max_bytes=MAX_SUBJECT_BYTES), MAX_KEY_CHARS)


def check_id_prefix(field: str, text: str) -> str:
    """A memory id or a prefix of at least MIN_PREFIX_LENGTH characters, normalised (upper
    case, Crockford look-alikes mapped)."""
    prefix = normalize_id_prefix(text)
    if len(prefix) < MIN_PREFIX_LENGTH:
        raise InvalidParams.for_field(field, f"must be at least {MIN_PREFIX_LENGTH} characters of a memory id")
    if len(prefix) > ULID_LENGTH or not is_id_prefix(prefix):
        raise InvalidParams.for_field(field, NOT_AN_ID)
    return prefix


def check_full_id(field: str, value: str) -> str:
    """A complete memory id, exactly as stored."""
    if len(value) != ULID_LENGTH or not is_id_prefix(value):
        raise InvalidParams.for_field(field, NOT_AN_ID)
    return value


def check_group_chat(shared: bool, chat_id: str | None) -> None:
    """A shared (group) memory belongs to a chat."""
    if shared and chat_id is None:
        raise InvalidParams.for_field("chat_id", "is required for a shared (group) memory")


def optional_text(value: object, *, max_chars: int = 256) -> str | None:
    """One of ash's loosely typed routing fields (``source_username``, ``chat_type``, ...) as
    text when it is a usable string, else None: these fields are hints, never errors."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value[:max_chars] if value and "\x00" not in value else None
