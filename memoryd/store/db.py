"""SQLite connections: one writer and a pool of readers, all run off the event loop.

apsw's best-practice hooks and sqlite-vec are applied to every connection through
``apsw.connection_hooks``.  The writer is used by one thread at a time (a trio
CapacityLimiter(1) for async callers plus a threading lock so the few synchronous start-up
methods cannot interleave with a write running in a worker thread).  Readers are handed out
from a free list sized by another CapacityLimiter, so a search never waits behind a write
(WAL lets readers and the writer run concurrently).

Every call reports SQLite's verdict on the storage to ``self.condition`` (``condition.py``):
SQLITE_FULL becomes ``DiskFull``, SQLITE_CORRUPT / SQLITE_NOTADB ``StoreCorrupt``, and a
store found corrupt takes no more writes.  Files are created 0600 whatever the umask (SQLite
gives the -wal and -shm files the database file's mode).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import apsw
import apsw.bestpractice
import apsw.ext
import sqlite_vec  # type: ignore[import-untyped]
import trio

from memoryd.errors import StoreBusy, StoreCorrupt, StoreError
from memoryd.store.condition import StorageCondition, reporting_to

P = ParamSpec("P")
T = TypeVar("T")

#: Reads map the file instead of copying pages through read(2); vector scans are ~30% faster.
# No mmap: every connection maps the file separately, so the same page counts once per
# connection in the daemon's RSS (885 MiB at 100k memories with 5 connections); reads through
# SQLite's page cache and the OS cache measured a few ms slower at most.
MMAP_BYTES = 0
#: Per-connection page cache (negative = KiB).
CACHE_KIB = 16 * 1024

_hooks_lock = threading.Lock()
_hooks_installed = False


def _load_sqlite_vec(connection: apsw.Connection) -> None:
    connection.enable_load_extension(True)
    try:
        connection.load_extension(sqlite_vec.loadable_path())
    finally:
        connection.enable_load_extension(False)


def install_connection_hooks() -> None:
    """Once per process: apsw best practice (WAL, foreign keys, ...) and sqlite-vec."""
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        apsw.bestpractice.apply(apsw.bestpractice.recommended)
        # SQLite's own log goes to memoryd's loggers at INFO at most: the errors that matter
        # (a full disk, a damaged file) are raised and reported once by the store itself, and
        # a damaged file would otherwise print dozens of lines per query.
        apsw.ext.log_sqlite(level=logging.INFO, logger=logging.getLogger("memoryd.sqlite"))
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
    except apsw.Error as exc:
        raise StoreError(f"cannot open database {path}: {exc}") from exc
    # After the hooks, which set a short busy timeout of their own.
    connection.set_busy_timeout(busy_timeout_ms)
    connection.pragma("mmap_size", mmap_bytes)
    connection.pragma("cache_size", -CACHE_KIB)
    if not readonly:
        # WAL + NORMAL: a commit survives a crash of the process; only power loss can drop
        # the last transactions, never corrupt the file.
        connection.pragma("synchronous", "NORMAL")
    return connection


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


class Database:
    """The connections of one store file."""

    def __init__(
        self,
        path: Path,
        *,
        readers: int,
        busy_timeout_ms: int,
        mmap_bytes: int = MMAP_BYTES,
        readonly: bool = False,
    ) -> None:
        """``readonly``: only read (the admin commands that never write), which also works on a
        read-only mount or a directory this user may not write."""
        if readers < 1:
            raise ValueError("readers must be >= 1")
        self.path = path
        self.readonly = readonly
        self.condition = StorageCondition(path)
        self._busy_timeout_ms = busy_timeout_ms
        self._mmap_bytes = mmap_bytes
        # Without write access to the directory SQLite cannot create the -shm file; with no WAL
        # left to replay, nobody can be writing the file, so it may be read as immutable.
        self._immutable = readonly and not os.access(path.parent, os.W_OK) and not _has_wal(path)
        self._writer: apsw.Connection | None = open_connection(
            path, busy_timeout_ms=busy_timeout_ms, mmap_bytes=mmap_bytes, readonly=readonly, immutable=self._immutable
        )
        self._writer_lock = threading.Lock()
        #: Bumped by every write transaction: lets readers cache derived numbers (health).
        self.write_count = 0
        self._writer_limiter = trio.CapacityLimiter(1)
        self._reader_count = readers
        self._readers: list[apsw.Connection] = []
        self._free_readers: list[apsw.Connection] = []
        self._reader_limiter = trio.CapacityLimiter(readers)
        self._sync_reader: apsw.Connection | None = None
        self._sync_reader_lock = threading.Lock()

    def _open_reader(self) -> apsw.Connection:
        return open_connection(
            self.path,
            busy_timeout_ms=self._busy_timeout_ms,
            readonly=True,
            mmap_bytes=self._mmap_bytes,
            immutable=self._immutable,
        )

    def open_readers(self) -> None:
        """Open the reader pool (after migrations: a read-only connection cannot create the file)."""
        for _ in range(self._reader_count):
            reader = self._open_reader()
            self._readers.append(reader)
            self._free_readers.append(reader)

    def file_bytes(self) -> int:
        """The database file plus its WAL, in bytes."""
        return sum(file_sizes(self.path).values())

    @property
    def closed(self) -> bool:
        return self._writer is None

    def _require_writer(self) -> apsw.Connection:
        if self._writer is None:
            raise StoreError("the store is closed")
        return self._writer

    def _require_writable(self) -> apsw.Connection:
        writer = self._require_writer()
        if self.readonly:
            raise StoreError(f"{self.path} was opened read-only")
        if self.condition.current.state == "corrupt":
            # Writing to a damaged b-tree can spread the damage: refuse before touching it.
            raise StoreCorrupt(f"the database file is damaged: {self.condition.current.reason}")
        return writer

    # -- synchronous access (start-up, CLI, benchmarks) ---------------------------------------

    def write_sync(self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(connection, ...)`` in one write transaction on the calling thread."""
        with self._writer_lock:
            writer = self._require_writable()
            try:
                with reporting_to(self.condition, writing=True), write_transaction(writer):
                    return fn(writer, *args, **kwargs)
            finally:
                self.write_count += 1

    def read_sync(self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(reader, ...)`` in one read snapshot on the calling thread (host-side tools:
        a long export reads a consistent snapshot without holding the write lock)."""
        # Its own connection, not one of the pool: the pool's accounting is a trio limiter,
        # which a plain thread (the maintenance task's worker, the CLI) cannot take part in.
        with self._sync_reader_lock:
            self._require_writer()
            if self._sync_reader is None:
                self._sync_reader = self._open_reader()
            with reporting_to(self.condition, writing=False):
                return _read_in_snapshot(self._sync_reader, fn, args, kwargs)

    def plain_sync(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run ``fn(writer)`` outside any transaction (pragmas such as wal_checkpoint)."""
        with self._writer_lock, reporting_to(self.condition, writing=False):
            return fn(self._require_writer())

    # -- async access --------------------------------------------------------------------------

    async def write(self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        async with self._writer_limiter:
            try:
                return await trio.to_thread.run_sync(lambda: self.write_sync(fn, *args, **kwargs))
            except apsw.BusyError:
                # BEGIN IMMEDIATE waited busy_timeout for another process's lock: nothing written.
                raise StoreBusy(self._busy_timeout_ms) from None

    async def read(self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(reader, ...)`` in one read transaction (one consistent snapshot)."""
        async with self._reader_limiter:
            if not self._free_readers:
                raise StoreError("the store is closed")
            reader = self._free_readers.pop()
            try:
                return await trio.to_thread.run_sync(self._read_reporting, reader, fn, args, kwargs)
            except apsw.BusyError:
                raise StoreBusy(self._busy_timeout_ms) from None
            finally:
                self._free_readers.append(reader)

    def _read_reporting(
        self, reader: apsw.Connection, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> T:
        with reporting_to(self.condition, writing=False):
            return _read_in_snapshot(reader, fn, args, kwargs)

    def quick_check(self, on_start: Callable[[Callable[[], None]], None] = lambda interrupt: None) -> list[str] | None:
        """SQLite's ``quick_check`` (every page read, b-tree structure verified, indexes not
        compared to their tables) on a connection of its own: ``["ok"]``, the problems found
        (at most 20), or None when interrupted.

        ``on_start`` receives a thread-safe function that interrupts the check (shutdown)."""
        connection = self._open_reader()
        try:
            on_start(connection.interrupt)
            try:
                with reporting_to(self.condition, writing=False):
                    # One line each: SQLite puts newlines inside some of them.
                    messages = [" ".join(str(row[0]).split()) for row in connection.execute("PRAGMA quick_check(20)")]
            except apsw.InterruptError:
                return None
            except StoreCorrupt as exc:
                return [str(exc)]  # reporting_to told the condition already
        finally:
            connection.close()
        if messages != ["ok"]:
            self.condition.corrupt("; ".join(messages[:3]))
        return messages

    def close(self) -> None:
        with self._writer_lock:
            for reader in self._readers:
                reader.close()
            self._readers.clear()
            self._free_readers.clear()
            with self._sync_reader_lock:
                if self._sync_reader is not None:
                    self._sync_reader.close()
                    self._sync_reader = None
            if self._writer is not None:
                if not self.readonly:
                    with contextlib.suppress(apsw.Error):
                        self._writer.pragma("optimize")
                self._writer.close()
                self._writer = None


def _read_in_snapshot(
    reader: apsw.Connection, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> T:
    # A SAVEPOINT as the outermost transaction is a deferred BEGIN: every statement of fn
    # sees the same snapshot, even while the writer commits.
    with reader:
        result = fn(reader, *args, **kwargs)
    return result


def _has_wal(path: Path) -> bool:
    try:
        return os.path.getsize(f"{path}-wal") > 0
    except OSError:
        return False


def file_sizes(path: Path) -> dict[str, int]:
    """Bytes of the database ``file`` and of its ``wal`` (those that exist)."""
    sizes = {}
    for name, suffix in (("file", ""), ("wal", "-wal")):
        with contextlib.suppress(OSError):
            sizes[name] = os.path.getsize(f"{path}{suffix}")
    return sizes


def one(db: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    """The single row an aggregate or a known key must produce."""
    row = db.execute(sql, params).fetchone()
    if row is None:
        raise StoreError("the database returned no row where one was expected")
    return tuple(row)
