"""SQLite's ``quick_check`` of a whole database file, on a connection of its own.

Every page is read and each b-tree's structure verified (indexes are not compared to their
tables).  The daemon runs it at start, before the store is even open (``server/integrity.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import apsw

from memoryd.errors import StoreError

#: SQLite's file header marks a WAL database with 2 in bytes 18 and 19.
_WAL_MARK = b"\x02\x02"


def is_wal_database(path: Path) -> bool:
    """Whether ``path`` is a WAL-mode database (a read connection then never blocks a writer)."""
    try:
        with open(path, "rb") as file:
            header = file.read(20)
    except OSError:
        return False
    return header.startswith(b"SQLite format 3\x00") and header[18:20] == _WAL_MARK


def quick_check_file(
    path: Path, *, busy_timeout_ms: int, on_start: Callable[[Callable[[], None]], None] = lambda interrupt: None
) -> list[str] | None:
    """``["ok"]``, the problems found (at most 20, one line each), or None when interrupted.

    ``on_start`` receives a thread-safe function that interrupts the check (shutdown), and
    does nothing once the check is over.  Raises
    StoreError when the file cannot be read at all for another reason than damage.
    """
    # A bare connection, not connection.open_connection: quick_check needs neither sqlite-vec
    # (its tables are plain tables to it) nor the pragmas, and this module stays importable in
    # a few ms, before numpy (which sqlite_vec imports).
    try:
        connection = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        raise StoreError(f"cannot check {path}: {exc}") from exc
    closing = threading.Lock()
    checking = True

    def interrupt() -> None:  # harmless once the check is over and its connection closed
        with closing:
            if checking:
                connection.interrupt()

    try:
        connection.set_busy_timeout(busy_timeout_ms)
        on_start(interrupt)
        # One line each: SQLite puts newlines inside some of them.
        return [" ".join(str(row[0]).split()) for row in connection.execute("PRAGMA quick_check(20)")]
    except apsw.InterruptError:
        return None
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [f"the database file is damaged: {exc}"]
    except apsw.Error as exc:
        raise StoreError(f"cannot check {path}: {exc}") from exc
    finally:
        with closing:
            checking = False
            connection.close()
