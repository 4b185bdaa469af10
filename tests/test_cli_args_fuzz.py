"""The sandbox ``memory`` command given bad and extreme arguments: a message and an exit code, never a traceback.

Hypothesis writes command lines from the parser itself (its subcommands and their options, so
a new one is covered without touching this file) with values at and past the edges, and
bytes on stdin; ``main`` runs in-process against a live daemon.  It must return an exit code
from the documented table (or argparse's usage exit), and every non-zero code comes with a
message on stderr.  For a long run: ``MEMORYD_FUZZ_LONG=1``.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_cli.cli import EXIT_ERROR, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, build_parser, main, subcommands
from memoryd_client import InvalidParams, MemoryClient
from tests.conftest import DaemonProcess

LONG = os.environ.get("MEMORYD_FUZZ_LONG") == "1"
CLI_FUZZ = settings(
    max_examples=3_000 if LONG else 40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
#: ``mcp`` serves a protocol on stdin until it closes (tests/test_mcp*.py drive it).
SERVERS = {"mcp"}


#: An option line of a help text: the flags and their metavars, then two spaces or the line's end.
OPTION_LINE = re.compile(r"^  (-\S.*?)(?:  |$)", re.MULTILINE)
FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")


def options(parser: argparse.ArgumentParser) -> list[str]:
    """Every flag the subcommand's help lists (``-n N, --limit N``: both)."""
    return [flag for line in OPTION_LINE.findall(parser.format_help()) for flag in FLAG.findall(line)]


def positionals(parser: argparse.ArgumentParser) -> int:
    """How many positional arguments the subcommand's usage names (its words outside brackets)."""
    usage = re.sub(r"\[[^\]]*\]", " ", parser.format_usage()).split()
    return len(usage) - 3  # "usage:", "memory", the subcommand


COMMANDS = {name: sub for name, sub in subcommands(build_parser()).items() if name not in SERVERS}
VALUES = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "-",
            "--",
            "0",
            "-1",
            "1e999",
            "nan",
            "inf",
            "-0",
            "0.5",
            "36501",
            str(2**63),
            "9" * 400,
            "x" * 20_000,
            "ZZZZZZZZ",
            "0" * 26,
            "\udcff\udcfe",  # what Python makes of argv bytes that are not UTF-8
            "\u202e\u200b",
            "\t\n",
            "a=b",
        ]
    ),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20),
)
STDIN = st.one_of(
    st.binary(max_size=60),
    st.sampled_from(
        [
            b"",
            b"\xff\xfe",
            b'{"role": "user", "content": "hi"}\n',
            b'{"role": "robot", "content": 1}\n',
            b"[1, 2]\n",
            b'{"role": "user"}\n' * 3,
            b'{"role": "user", "content": "' + b"x" * 70_000 + b'"}\n',
            b'{"role": "user", "content": "hi"}\n' * 150,
            b"null\n",
        ]
    ),
)


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    name = draw(st.sampled_from(sorted(COMMANDS)))
    sub = COMMANDS[name]
    words = [name]
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["option", "value", "positional"]))
        if kind == "option":
            words.append(draw(st.sampled_from([*options(sub), "--nope", "-"])))
        words.append(draw(VALUES))
    # Sometimes exactly the positionals the subcommand wants, so the call reaches the daemon.
    if draw(st.booleans()):
        words = [name, *(draw(VALUES) for _ in range(positionals(sub)))]
    return words


@pytest.fixture(scope="module")
def daemon_socket() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="md-cf-", dir="/tmp"))
    process = DaemonProcess(base).start()
    yield process.socket
    alive = process.proc is not None and process.proc.poll() is None
    process.stop()
    shutil.rmtree(base, ignore_errors=True)
    assert alive, "the daemon died during the CLI fuzz"


def run_cli(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[Any, str]:
    """(main's exit code, stderr) with ``env`` set and ``stdin`` fed, in this process."""
    saved = sys.stdin, sys.stdout, sys.stderr, dict(os.environ)
    err = io.StringIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout, sys.stderr = io.StringIO(), err
    os.environ.update(env)
    try:
        try:
            code: Any = main(argv)
        except SystemExit as exit:
            code = exit.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved[:3]
        os.environ.clear()
        os.environ.update(saved[3])
    return code, err.getvalue()


@CLI_FUZZ
@given(command_lines(), STDIN, st.sampled_from(["fuzz-cli", "", " ", "bad\tuser", "u" * 300, "\udcff"]))
def test_bad_arguments_get_a_message_and_an_exit_code(
    daemon_socket: Path, argv: list[str], stdin: bytes, user: str
) -> None:
    code, err = run_cli(argv, stdin, {"MEMORYD_SOCKET": str(daemon_socket), "MEMORY_USER_ID": user})
    assert code in (EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNREACHABLE), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code != EXIT_OK:
        assert err.strip(), (argv, code)
    if code == EXIT_UNREACHABLE:
        pytest.fail(f"the live daemon was reported unreachable: {argv} {err}")


@pytest.mark.parametrize(("argv", "field"), [([b"add", b"tea \xff"], "content"), ([b"search", b"\xfe"], "query")])
def test_an_argument_that_is_not_utf8_is_refused_by_name(daemon_socket: Path, argv: list[bytes], field: str) -> None:
    # Python hands such argv bytes over as lone surrogates, which have no UTF-8 form: the
    # client once failed encoding the request with a traceback.
    env = {**os.environ, "MEMORYD_SOCKET": str(daemon_socket), "MEMORY_USER_ID": "fuzz-cli"}
    done = subprocess.run([sys.executable, "-m", "memory_cli", *argv], env=env, capture_output=True, check=False)
    assert done.returncode == EXIT_ERROR, done
    assert (
        done.stderr.decode().strip()
        == f"Error: Invalid params: {field}: must be valid Unicode (it has a lone surrogate)"
    )
    listed = subprocess.run(
        [sys.executable, "-m", "memory_cli", "list", "--json"], env=env, capture_output=True, check=True
    )
    assert "tea" not in listed.stdout.decode()


def test_the_client_refuses_a_lone_surrogate_before_sending(daemon_socket: Path) -> None:
    with MemoryClient(socket_path=str(daemon_socket), user_id="fuzz-cli") as client:
        with pytest.raises(InvalidParams) as refused:
            client.add("tea \udcff", subjects=["Bob"])
        assert refused.value.field == "content"
        assert client.health()["status"] == "ok"  # the connection is fine for the next call
