"""SQLite connections: one writer and a pool of readers, all run off the event loop.

apsw's best-practice hooks and sqlite-vec are applied to every connection through
``apsw.connection_hooks``.  The writer is used by one thread at a time (a trio
CapacityLimiter(1) for async callers plus a threading lock so the few synchronous start-up
methods cannot interleave with a write running in a worker thread).  Readers are handed out
from a free list sized by another CapacityLimiter, so a search never waits behind a write
(WAL lets readers and the writer run concurrently).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import apsw
import apsw.bestpractice
import sqlite_vec  # type: ignore[import-untyped]
import trio

from memoryd.errors import StoreBusy, StoreError

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
        apsw.connection_hooks.append(_load_sqlite_vec)
        _hooks_installed = True


def open_connection(
    path: Path, *, busy_timeout_ms: int, readonly: bool = False, mmap_bytes: int = MMAP_BYTES
) -> apsw.Connection:
    install_connection_hooks()
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    try:
        connection = apsw.Connection(str(path), flags=flags)
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
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    else:
        connection.execute("COMMIT")


class Database:
    """The connections of one store file."""

    def __init__(self, path: Path, *, readers: int, busy_timeout_ms: int, mmap_bytes: int = MMAP_BYTES) -> None:
        if readers < 1:
            raise ValueError("readers must be >= 1")
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._mmap_bytes = mmap_bytes
        self._writer: apsw.Connection | None = open_connection(
            path, busy_timeout_ms=busy_timeout_ms, mmap_bytes=mmap_bytes
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

    def open_readers(self) -> None:
        """Open the reader pool (after migrations: a read-only connection cannot create the file)."""
        for _ in range(self._reader_count):
            reader = open_connection(
                self.path, busy_timeout_ms=self._busy_timeout_ms, readonly=True, mmap_bytes=self._mmap_bytes
            )
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

    # -- synchronous access (start-up, CLI, benchmarks) ---------------------------------------

    def write_sync(self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(connection, ...)`` in one write transaction on the calling thread."""
        with self._writer_lock:
            writer = self._require_writer()
            try:
                with write_transaction(writer):
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
                self._sync_reader = open_connection(
                    self.path, busy_timeout_ms=self._busy_timeout_ms, readonly=True, mmap_bytes=self._mmap_bytes
                )
            return _read_in_snapshot(self._sync_reader, fn, args, kwargs)

    def plain_sync(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run ``fn(writer)`` outside any transaction (pragmas such as wal_checkpoint)."""
        with self._writer_lock:
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
                return await trio.to_thread.run_sync(_read_in_snapshot, reader, fn, args, kwargs)
            except apsw.BusyError:
                raise StoreBusy(self._busy_timeout_ms) from None
            finally:
                self._free_readers.append(reader)

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
