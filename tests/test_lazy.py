"""memoryd.lazy: names imported on first use, patterns compiled on first use (start-up cost)."""

from __future__ import annotations

import re
import sys
import types
import unittest.mock

import pytest

from memoryd.lazy import LazyPattern, exports_on_first_use


def test_exports_on_first_use_imports_once_and_keeps_the_name() -> None:
    package = types.ModuleType("fake_package")
    sys.modules["fake_package"] = package
    try:
        lookup = exports_on_first_use("fake_package", {"json.decoder": ("JSONDecoder",)})
        import json.decoder

        assert lookup("JSONDecoder") is json.decoder.JSONDecoder
        assert package.JSONDecoder is json.decoder.JSONDecoder  # kept: the next lookup is plain
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            lookup("nope")
    finally:
        del sys.modules["fake_package"]


@pytest.mark.parametrize(
    ("source", "flags", "text"),
    [
        (r"(?P<word>[a-z]+)(?P<digits>\d+)?", re.IGNORECASE, "xx Abc12 de ff9"),
        (r"\s*(?:[;.!?]+\s+|,?\s+(?:and|but)\s+)", 0, "I moved. And then, and we left; ok"),
        (r"^(?:was|were)\s+(?!born\b)", re.I, "Was living in Rome"),
    ],
)
def test_a_lazy_pattern_answers_as_the_compiled_one(source: str, flags: int, text: str) -> None:
    lazy, eager = LazyPattern(source, flags), re.compile(source, flags)

    def spans(found: re.Match[str] | None) -> tuple[int, int] | None:
        return found.span() if found else None

    for pos in (0, 3):
        assert spans(lazy.match(text, pos)) == spans(eager.match(text, pos))
        assert spans(lazy.search(text, pos)) == spans(eager.search(text, pos))
        assert spans(lazy.fullmatch(text, pos)) == spans(eager.fullmatch(text, pos))
        assert [m.span() for m in lazy.finditer(text, pos)] == [m.span() for m in eager.finditer(text, pos)]
    assert spans(lazy.search(text, 0, 5)) == spans(eager.search(text, 0, 5))
    assert lazy.sub("_", text) == eager.sub("_", text)
    assert lazy.sub("_", text, count=1) == eager.sub("_", text, count=1)
    assert lazy.sub(lambda m: m.group(0).upper(), text) == eager.sub(lambda m: m.group(0).upper(), text)
    assert lazy.split(text) == eager.split(text)
    assert lazy.split(text, maxsplit=1) == eager.split(text, maxsplit=1)
    fresh = LazyPattern(lazy.source, lazy.flags)
    with unittest.mock.patch("re.compile", wraps=re.compile) as compile_:
        fresh.search(text)
        fresh.match(text)
        fresh.sub("_", text)
    assert compile_.call_count == 1  # compiled once, on first use


def test_compile_waiting_compiles_what_was_not_used_yet() -> None:
    LazyPattern.compile_waiting()
    used, _unused = LazyPattern("used"), LazyPattern("unused")
    assert used.search("it is used")
    assert LazyPattern.compile_waiting() == 1  # unused's (used was compiled by its search)
    assert LazyPattern.compile_waiting() == 0


def test_the_daemons_patterns_wait_until_after_start_up() -> None:
    """Importing the knowledge rules compiles none of their patterns (the point of laziness):
    once the daemon's modules are imported, ``compile_waiting`` still has every pattern they made
    to compile (counted among the live objects through ``gc``: the list of them is private)."""
    import subprocess

    code = (
        "import gc, memoryd.cli, memoryd.server.head_start, memoryd.server.serve\n"
        "from memoryd.lazy import LazyPattern\n"
        "made = sum(isinstance(o, LazyPattern) for o in gc.get_objects())\n"
        "print(made, LazyPattern.compile_waiting())"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    made, still_to_compile = map(int, out.split())
    assert made > 50
    assert still_to_compile == made  # none was compiled by the imports
