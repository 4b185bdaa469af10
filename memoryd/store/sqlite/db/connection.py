"""Opening one SQLite connection: apsw's best-practice hooks and sqlite-vec on every connection,
the pragmas memoryd runs with, 0600 files, and the write transaction every writer uses.

``db.py`` builds the writer and the reader pool on top of these.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import apsw.bestpractice
import apsw.ext
import sqlite_vec  # type: ignore[import-untyped]

from memoryd.errors import StoreCorrupt, StoreError

#: Reads map the file instead of copying pages through read(2); vector scans are ~30% faster.
# No mmap: every connection maps the file separately, so the same page counts once per
# connection in the daemon's RSS (885 MiB at 100k memories with 5 connections); reads through
# SQLite's page cache and the OS cache measured a few ms slower at most.
MMAP_BYTES = 0
#: Per-connection page cache (negative = KiB).  The sum over connections is capped further by
#: ``Store.limit_cache_memory`` (the daemon's ``storage.cache_mib``).
CACHE_KIB = 16 * 1024

_hooks_lock = threading.Lock()
_hooks_installed = False


def _load_sqlite_vec(connection: apsw.Connection) -> None:
    connection.enable_load_extension(True)
    try:
        connection.load_extension(sqlite_vec.loadable_path())
    finally:
        connection.enable_load_extension(False)


#: The busy timeout of a connection while its hooks run, and then of any connection opened
#: without ``open_connection`` (which sets the caller's).  apsw's best practice gives 100 ms,
#: which a write of another connection on a loaded machine outlasts.
HOOK_BUSY_TIMEOUT_MS = 5000

#: apsw's best practice for every new connection, less its 100 ms busy timeout (the hook sets
#: a wait of its own first) and its PRAGMA optimize, which may write statistics and so needs
#: the write lock: ``open_connection`` runs it only if nobody holds that lock.
_BEST_PRACTICE = (
    apsw.bestpractice.connection_wal,
    apsw.bestpractice.connection_enable_foreign_keys,
    apsw.bestpractice.connection_dqs,
    apsw.bestpractice.connection_recursive_triggers,
)


def _best_practice(connection: apsw.Connection) -> None:
    # First: switching a new file to WAL takes a lock, which another connection may hold.
    connection.set_busy_timeout(HOOK_BUSY_TIMEOUT_MS)
    for hook in _BEST_PRACTICE:
        hook(connection)


def install_connection_hooks() -> None:
    """Once per process: apsw best practice (WAL, foreign keys, ...) and sqlite-vec."""
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        apsw.connection_hooks.append(_best_practice)
        # SQLite's own log goes to memoryd's loggers at DEBUG: its lines quote SQL text, the
        # errors that matter (a full disk, a damaged file) are raised and reported once by the
        # store itself, and a statement re-prepared after a schema change (SQLITE_SCHEMA) is
        # routine, not news.
        apsw.ext.log_sqlite(level=logging.DEBUG, logger=logging.getLogger("memoryd.sqlite"))
        apsw.connection_hooks.append(_load_sqlite_vec)
        _hooks_installed = True


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists (then it is left alone)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)  # the umask may have taken bits away; never adds any
    finally:
        os.close(fd)


def open_connection(
    path: Path,
    *,
    busy_timeout_ms: int,
    readonly: bool = False,
    mmap_bytes: int = MMAP_BYTES,
    immutable: bool = False,
) -> apsw.Connection:
    """``immutable``: read a file nobody can be writing (its directory is read-only and it has
    no WAL), without the -shm file SQLite could not create there."""
    install_connection_hooks()
    name, flags = str(path), apsw.SQLITE_OPEN_READONLY
    if immutable:
        name = f"file:{urllib.parse.quote(str(path))}?mode=ro&immutable=1"
        flags |= apsw.SQLITE_OPEN_URI
    elif not readonly:
        try:
            create_private_file(path)
        except OSError as exc:
            raise StoreError(f"cannot create database {path}: {exc.strerror or exc}") from exc
        flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    try:
        connection = apsw.Connection(name, flags=flags)
        # After the hooks, which set a busy timeout of their own.
        connection.set_busy_timeout(busy_timeout_ms)
        if not readonly and not immutable:
            _optimize_unless_locked(connection, busy_timeout_ms)
        connection.pragma("mmap_size", mmap_bytes)
        # The first statement that reads the file: where a WAL file or -shm that cannot be
        # created (a read-only mount) shows as CantOpenError.
        connection.pragma("cache_size", -CACHE_KIB)
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        # The connection hooks already read the schema: a damaged file shows here, before the
        # start-up integrity check may have finished, and is refused as damaged all the same.
        raise StoreCorrupt(f"cannot open database {path}: {exc}") from exc
    except apsw.Error as exc:
        raise StoreError(f"cannot open database {path}: {_open_failure_cause(path, exc)}") from exc
    # Query planner stability: plans never depend on a bound value.  Without it, SQLite's STAT4
    # statistics (PRAGMA optimize writes them) make every statement that binds a value to an
    # indexed column (scope_key = ?, expires_at_ms > ?) re-prepare itself on each execution,
    # since the plan was chosen for the value bound before: ~0.4 M instructions per statement,
    # several per search.  Our statements pin their plans by shape (CROSS JOIN, indexes).
    connection.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
    if not readonly:
        # WAL + NORMAL: a commit survives a crash of the process; only power loss can drop
        # the last transactions, never corrupt the file.
        connection.pragma("synchronous", "NORMAL")
        # Deleted content is overwritten with zeros, not left in free space: an erasure
        # (``erasure.py``) must leave no trace in the file.
        connection.pragma("secure_delete", 1)
    return connection


def _optimize_unless_locked(connection: apsw.Connection, busy_timeout_ms: int) -> None:
    """apsw's best-practice PRAGMA optimize (ANALYZE of the tables whose statistics are stale,
    if any), unless another connection holds the write lock: statistics are worth no wait, and
    a connection must never fail to open for them.  The writer runs it again when the store
    closes."""
    connection.set_busy_timeout(0)
    try:
        apsw.bestpractice.connection_optimize(connection)
    except apsw.BusyError:
        pass
    finally:
        connection.set_busy_timeout(busy_timeout_ms)


def _open_failure_cause(path: Path, exc: apsw.Error) -> str:
    """SQLite says "disk I/O error" when a full disk leaves no room for the -shm file: name the cause."""
    if isinstance(exc, (apsw.IOError, apsw.FullError)):
        try:
            full = os.statvfs(path.parent).f_bavail == 0
        except OSError:
            full = False
        if full:
            return f"{exc} ({os.strerror(errno.ENOSPC)})"
    return str(exc)


@contextlib.contextmanager
def write_transaction(connection: apsw.Connection) -> Iterator[apsw.Connection]:
    """BEGIN IMMEDIATE: take the write lock up front, so a transaction never fails half-way
    with SQLITE_BUSY when another process (the CLI) writes at the same time."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
        connection.execute("COMMIT")
    except BaseException:
        # SQLite may have rolled back already (a failed COMMIT on a full disk): a second
        # ROLLBACK would fail and hide the error that matters.
        if not connection.getautocommit():
            connection.execute("ROLLBACK")
        raise


def one(db: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    """The single row an aggregate or a known key must produce."""
    row = db.execute(sql, params).fetchone()
    if row is None:
        raise StoreError("the database returned no row where one was expected")
    return tuple(row)


def rows_changed(db: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> int:
    """Run one statement; the rows it changed, those its triggers changed included (FTS5's
    'merge' command reports its work only that way)."""
    before: int = db.total_changes()
    db.execute(sql, params)
    return int(db.total_changes() - before)
