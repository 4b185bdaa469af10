"""What the admin commands share: opening the store, exit codes, small formatting helpers."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

import msgspec

from memoryd.config import Config
from memoryd.errors import StoreError, StoreRefused
from memoryd.server import data_dir
from memoryd.store import backends
from memoryd.store.interfaces import Backend

EXIT_OK = 0
#: The command ran but found or hit a problem (check found damage, import rejected the file).
EXIT_PROBLEMS = 1


def open_store(config: Config, *, create: bool = False, readonly: bool = False) -> Backend:
    """The daemon's database (migrated to this memoryd's schema), for one admin command.

    Without ``create`` a missing file is an error: a typo in --data-dir must not make an
    empty store appear.  ``readonly`` for the commands that only read: no migration, no write,
    and it works on a read-only disk or in a directory this user may not write.
    """
    path = config.db_path
    if config.storage.backend == "sqlite" and not path.exists():
        if not create:
            raise StoreError(f"no database at {path} (check --data-dir / data_dir)")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    elif config.storage.backend == "sqlite":
        # The rule `memoryd serve` applies: a command that writes must not turn what may be a
        # truncated store into a fresh one, which the daemon would then serve as if nothing was lost.
        try:
            data_dir.refuse_unexpectedly_empty(path)
        except StoreRefused as exc:
            raise StoreError(str(exc)) from None
    return backends.open_store(config, readers=1, whole_scans=True, readonly=readonly)


def human_bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


def print_json(data: Any, out: TextIO = sys.stdout) -> None:
    out.write(msgspec.json.format(msgspec.json.encode(data), indent=2).decode() + "\n")


def printable(text: object) -> str:
    """``text`` safe for a terminal: every character that is not printable (control characters
    such as ESC, invisible and format characters, lone surrogates, spaces other than " ") is
    shown as its escape, the way Python's repr writes it (``\\x1b``, ``\\u200b``), and a
    backslash as two, so what is shown cannot be mistaken for an escape.  User ids, chat ids,
    sources and errors come from callers: they never reach the terminal raw."""
    value = str(text)
    if value.isprintable() and "\\" not in value:
        return value
    return "".join(char if char.isprintable() and char != "\\" else repr(char)[1:-1] for char in value)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Left-aligned first column, right-aligned numbers; every cell through :func:`printable`."""
    cells = [[printable(cell) for cell in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        first = row[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join([first, *rest]).rstrip())
    return lines
