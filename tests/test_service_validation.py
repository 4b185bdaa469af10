"""The input rules of ``memoryd.service.validation``: one table of bad inputs per rule, and the
same rules applied to the lines of an import file."""

from __future__ import annotations

import msgspec
import pytest

from memoryd.admin.import_file import LineError, parse_line
from memoryd.errors import InvalidParams
from memoryd.service.validation import check_full_id, check_group_chat, check_id_prefix, check_text

ID = "01JAAAAAAAAAAAAAAAAAAAAAAA"


@pytest.mark.parametrize("bad", ["", "0123456", "01ARZ3N", "01ARZ3ND!", "01ARZ3ND EKTSV4", "U" * 8, "0" * 27])
def test_malformed_id_prefixes_are_invalid_params_naming_the_field(bad: str) -> None:
    with pytest.raises(InvalidParams) as info:
        check_id_prefix("memory_id", bad)
    assert info.value.data["field"] == "memory_id"


def test_a_prefix_is_normalised_case_insensitively_with_look_alikes() -> None:
    assert check_id_prefix("before_id", " 01jaaaaaaooil ") == "01JAAAAAA0011"


@pytest.mark.parametrize("bad", [ID[:-1], ID + "A", ID.lower(), "01JAAAAAAAAAAAAAAAAAAAAAAU"])
def test_a_full_id_is_26_crockford_characters_exactly(bad: str) -> None:
    assert check_full_id("id", ID) == ID
    with pytest.raises(InvalidParams):
        check_full_id("id", bad)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("", "must not be empty"),
        (" \n\t", "must not be empty"),
        ("a\x00b", "must not contain NUL characters"),
        ("a\ud800", "must be valid Unicode (it has a lone surrogate)"),
        ("é" * 9, "must be at most 16 bytes of UTF-8 (got 18)"),
    ],
)
def test_the_text_rule(value: str, reason: str) -> None:
    with pytest.raises(InvalidParams) as info:
        check_text("content", value, max_bytes=16)
    assert info.value.data == {"field": "content", "reason": reason}


def test_blank_text_is_allowed_only_when_asked() -> None:
    assert check_text("query", "  ", max_bytes=16, allow_blank=True) == "  "


def test_a_shared_memory_needs_a_chat() -> None:
    check_group_chat(False, None)
    check_group_chat(True, "c1")
    with pytest.raises(InvalidParams) as info:
        check_group_chat(True, None)
    assert info.value.data == {"field": "chat_id", "reason": "is required for a shared (group) memory"}


def line(**changes: object) -> bytes:
    fields: dict[str, object] = {
        "id": ID, "scope": "personal", "owner": "alice", "chat_id": None, "source": "agent", "content": "tea",
        "subjects": [], "metadata": {}, "confidence": 1.0, "created_at": "2025-01-02T03:04:05.678Z",
        "updated_at": "2025-01-02T03:04:05.678Z", "expires_at": None, "deleted_at": None,
        "expiry_recorded_at": None, "superseded_by": None, "access_count": 0, "last_access_at": None,
    }  # fmt: skip
    return msgspec.json.encode({**fields, **changes})


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"content": "\x00"}, "content must not contain NUL characters"),
        ({"owner": " "}, "owner must not be blank"),
        ({"subjects": ["ok", ""]}, "subjects[1] must not be empty"),
        ({"scope": "group"}, "chat_id is required for a shared (group) memory"),
        ({"id": "nope"}, "id is not a memory id"),
        ({"superseded_by": "x"}, "superseded_by is not a memory id"),
        ({"created_at": "2025-02-30T00:00:00.000Z"}, "created_at"),
        ({"access_count": -1}, "access_count must be >= 0"),
    ],
)
def test_import_lines_use_the_same_rules(changes: dict[str, object], reason: str) -> None:
    assert parse_line(1, line()).id == ID
    with pytest.raises(LineError) as info:
        parse_line(7, line(**changes))
    assert info.value.line == 7 and info.value.reason.startswith(reason)
