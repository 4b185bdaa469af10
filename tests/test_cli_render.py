"""The `memory` command's text output, as pure functions (no daemon)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import REPO

if importlib.util.find_spec("memory_cli") is None:  # not installed: use the source tree
    sys.path.insert(0, str(REPO / "sandbox-cli"))

render = importlib.import_module("memory_cli.render")

NOW = datetime(2025, 1, 31, 12, 0, 0, tzinfo=UTC)


def iso(delta: timedelta) -> str:
    return (NOW - delta).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=5), "5s"),
        (timedelta(minutes=3, seconds=59), "3m"),
        (timedelta(hours=5), "5h"),
        (timedelta(hours=47), "47h"),
        (timedelta(days=3), "3d"),
        (timedelta(days=20), "2w"),
        (timedelta(days=800), "2y"),
        (timedelta(seconds=-30), "0s"),  # clock skew: never negative
    ],
)
def test_age_is_short_and_coarse(delta: timedelta, text: str) -> None:
    assert render.age(iso(delta), NOW) == text


def test_age_of_garbage_is_a_question_mark() -> None:
    assert render.age("yesterday", NOW) == "?" and render.age(None, NOW) == "?"


@pytest.mark.parametrize(
    ("text", "width", "expected"),
    [
        ("short", 10, "short"),
        ("exactly10!", 10, "exactly10!"),
        ("a bit too long", 10, "a bit t..."),
        ("日本語のメモです", 10, "日本語..."),  # wide characters count two columns
        ("abc", 2, ".."),
    ],
)
def test_fit_cuts_to_display_columns(text: str, width: int, expected: str) -> None:
    assert render.fit(text, width) == expected
    assert render.display_width(render.fit(text, width)) <= width


def test_short_ids_grow_only_where_ids_collide() -> None:
    ids = ["01JABCDEFG0000000000000000", "01JABCDEFG1111111111111111", "01JZZZZZZZ0000000000000000"]
    assert render.short_ids(ids) == {
        ids[0]: "01JABCDEFG0",
        ids[1]: "01JABCDEFG1",
        ids[2]: "01JZZZZZ",
    }


def test_search_lines_tolerate_missing_fields() -> None:
    hits = [
        {
            "score": 0.874,
            "similarity": 0.2,
            "content": "Sarah likes\n  pasta",
            "subjects": ["Sarah", "Food"],
            "source": "user",
        },
        {"content": "bare"},
    ]
    assert render.search_lines(hits) == ["[0.87] Sarah likes pasta (about Sarah, Food) [user]", "[0.00] bare"]


def test_search_lines_print_the_score_they_are_sorted_by_and_who_from_about() -> None:
    hits = [
        {"score": 0.9, "similarity": 0.1, "relevance": 0.4, "content": "likes pasta", "about": ["Sarah"]},
        {"score": 0.5, "similarity": 0.8, "relevance": 0.6, "content": "a dog", "about": [], "subjects": ["Rex"]},
    ]
    assert render.search_lines(hits) == ["[0.90] likes pasta (about Sarah)", "[0.50] a dog (about Rex)"]


def test_list_lines_fit_the_width_with_wide_content() -> None:
    memory = {
        "id": "01JABCDEFG0000000000000000",
        "content": "東京の天気はとても良いです" * 5,
        "scope": "group",
        "subjects": ["Tokyo"],
        "source": "agent",
        "created_at": iso(timedelta(hours=2)),
        "expires_at": iso(timedelta(seconds=1)),
    }
    lines = render.list_lines([memory], width=60, now=NOW)
    assert lines[-1] == "Total: 1"
    assert all(render.display_width(line) <= 60 for line in lines)
    assert lines[1].split()[:5] == ["01JABCDE", "2h", "shared", "Tokyo", "agent"]
    assert "[expired]" in lines[1]


def test_health_lines_show_what_the_daemon_revealed() -> None:
    assert render.health_lines({"status": "ok", "version": "1.2.3", "uptime_seconds": 7300}) == [
        "memoryd 1.2.3: ok (up 2h)"
    ]
    full = render.health_lines(
        {
            "status": "degraded",
            "version": "1",
            "uptime_seconds": 5,
            "counts": {"active": 3},
            "embedder": {"backend": "ollama", "state": "down"},
            "backlog": {"embed": 2},
        }
    )
    assert full == [
        "memoryd 1: degraded (up 5s)",
        "counts: active 3",
        "embedder: backend ollama, state down",
        "backlog: embed 2",
    ]
