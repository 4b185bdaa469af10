"""docs/limits.md lists every per-user and per-peer bound with the default the code has."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.config.sections import LimitsConfig

DOC = (Path(__file__).resolve().parent.parent / "docs" / "limits.md").read_text()
KEYS = [
    "max_subjects_per_memory",
    "max_people_per_owner",
    "observe_messages_per_minute",
    "observe_bytes_per_minute",
    "max_observed_sessions_per_user",
    "max_queued_extractions_per_user",
    "max_inflight_per_connection",
    "max_inflight_per_uid",
]


@pytest.mark.parametrize("key", KEYS)
def test_each_bound_is_documented_with_its_default(key: str) -> None:
    rows = [line for line in DOC.splitlines() if line.startswith(f"| `{key}` |")]
    assert rows, f"docs/limits.md has no row for {key}"
    default = getattr(LimitsConfig(), key)
    assert rows[0].split("|")[2].strip().startswith(str(default)), rows[0]
