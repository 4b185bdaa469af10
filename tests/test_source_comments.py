"""Comments and docstrings say what the code does and why, never which ticket or stretch of work
brought it: those references mean nothing to the next reader and go stale with the tracker."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

FOLDERS = ("memoryd", "client", "sandbox-cli", "tests", "bench")

#: References to the work rather than the code.  "session" alone is a conversation session in
#: memoryd's own vocabulary, and "branch" a branch of code, so those only count with the words
#: that make them about the work.
WORK_REFERENCE = re.compile(
    r"""
      \b(?:issue|wave|phase|milestone|sprint)s?\s*\#?\s*\d+     # issue 13, wave 5, phase 2
    | \(\#\d+\) | \bsee\s+\#\d+                                  # "(#20)", "see #20"
    | \b(?:this|that|the\ previous|an\ earlier|a\ later|the\ next)\s+(?:issue|wave|work\ session|branch)\b
    | \b(?:coding|working|development|work)\s+session\b
    | \b(?:git|feature|topic|main|master)\s+branch\b
    """,
    re.IGNORECASE | re.VERBOSE,
)


def sources() -> list[Path]:
    return sorted(path for folder in FOLDERS for path in (REPO / folder).rglob("*.py"))


def comments_and_docstrings(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring in a module's source."""
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring and node.body:
                yield node.body[0].lineno, docstring


def test_the_scan_finds_the_sources() -> None:
    assert len(sources()) > 100


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("# measured in issue 13", True),
        ('"""The attacks of Issue 8, item 2."""', True),
        ("# README: 'Search at 10k (wave 6)'", True),
        ("# fixed in this branch", True),
        ("# (see #20)", True),
        ("# ranks #1 and #2", False),
        ("# one extraction job per session", False),
        ("# a branch of the vector search", False),
        ("# the session's high-water mark", False),
        ("# step 2 of 3", False),
        ("# the token is issued at iat", False),
    ],
)
def test_the_pattern_tells_work_references_from_the_code_s_own_words(text: str, found: bool) -> None:
    assert bool(WORK_REFERENCE.search(text)) is found


def test_no_comment_or_docstring_cites_an_issue_or_a_stretch_of_work() -> None:
    found = []
    for path in sources():
        if path == Path(__file__).resolve():
            continue  # the examples above are the pattern's own tests
        source = path.read_text(encoding="utf-8")
        if not WORK_REFERENCE.search(source):
            continue  # nothing that looks like one anywhere in the file: no need to parse it
        for line, text in comments_and_docstrings(source):
            for match in WORK_REFERENCE.finditer(text):
                found.append(f"{path.relative_to(REPO)}:{line}: {match.group(0)!r}")
    assert not found, "\n".join(found)
