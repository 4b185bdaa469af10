"""SQLite connections: one writer and a pool of readers, all run off the event loop.

Each connection is opened by ``connection.py`` (best-practice hooks, sqlite-vec, pragmas).
The writer is used by one thread at a time (a trio CapacityLimiter(1) for async callers plus
a threading lock so the few synchronous start-up methods cannot interleave with a write
running in a worker thread).  Readers are handed out
from a free list sized by another CapacityLimiter, so a search never waits behind a write
(WAL lets readers and the writer run concurrently).

Every call reports SQLite's verdict on the storage to ``self.condition`` (``condition.py``):
SQLITE_FULL becomes ``DiskFull``, SQLITE_CORRUPT / SQLITE_NOTADB ``StoreCorrupt``, and a
store found corrupt takes no more writes.  Files are created 0600 whatever the umask (SQLite
gives the -wal and -shm files the database file's mode).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import apsw
import trio

from memoryd.errors import StoreBusy, StoreCorrupt, StoreError
from memoryd.store.sqlite.db.condition import StorageCondition, reporting_to

# Re-exported: the store's modules, tests and benches import these from here.
from memoryd.store.sqlite.db.connection import MMAP_BYTES as MMAP_BYTES
from memoryd.store.sqlite.db.connection import one as one
from memoryd.store.sqlite.db.connection import open_connection as open_connection
from memoryd.store.sqlite.db.connection import rows_changed as rows_changed
from memoryd.store.sqlite.db.connection import write_transaction as write_transaction
from memoryd.store.sqlite.db.read_snapshot import ReadSnapshot

P = ParamSpec("P")
T = TypeVar("T")


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
        self._immutable = readonly and readable_only_as_immutable(path)
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
            except apsw.BusyError:
                raise self._busy() from None
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
            try:
                with reporting_to(self.condition, writing=False):
                    return _read_in_snapshot(self._sync_reader, fn, args, kwargs)
            except apsw.BusyError:
                raise self._busy() from None

    def plain_sync(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run ``fn(writer)`` outside any transaction (pragmas such as wal_checkpoint)."""
        with self._writer_lock:
            try:
                with reporting_to(self.condition, writing=False):
                    return fn(self._require_writer())
            except apsw.BusyError:
                raise self._busy() from None

    def _busy(self) -> StoreBusy:
        """For SQLITE_BUSY: another process held a lock past the busy timeout (BEGIN IMMEDIATE
        waited for it, so nothing was written).  Retryable, and said so to the caller (-32007),
        whichever way the call came: worker threads run the ``*_sync`` methods directly too."""
        return StoreBusy(self._busy_timeout_ms)

    # -- async access --------------------------------------------------------------------------

    async def write(self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        async with self._writer_limiter:
            return await trio.to_thread.run_sync(lambda: self.write_sync(fn, *args, **kwargs))

    async def read(self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(reader, ...)`` in one read transaction (one consistent snapshot)."""
        # Not ``snapshot`` + ``finish``: the same reader and transaction, but the snapshot's
        # turn lock costs a scheduler pass, ~20 us of CPU on every read call (measured).
        async with self._reader_limiter:
            with self._borrowed_reader() as reader:
                return await trio.to_thread.run_sync(self._read_reporting, reader, fn, args, kwargs)

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[ReadSnapshot]:
        """A reader of the pool holding one read transaction over several calls (waits for a
        free reader, as ``read`` does)."""
        async with self._reader_limiter:
            with self._lent() as snapshot:
                yield snapshot

    @property
    def free_readers(self) -> int:
        """Readers nobody holds right now."""
        return int(self._reader_limiter.available_tokens)

    def can_spare(self, *, keep_free: int) -> bool:
        """Whether a call may take a reader now and hold it idle for a while: more than
        ``keep_free`` readers are free (so other calls still find one)."""
        return self.free_readers > keep_free

    @contextlib.asynccontextmanager
    async def spare_snapshot(self, *, keep_free: int = 0) -> AsyncIterator[ReadSnapshot | None]:
        """Like ``snapshot`` if more than ``keep_free`` readers are free right now, else None at
        once.  A caller already holding a reader must never wait for a second (with every reader
        held that way, all would wait forever); ``keep_free`` leaves readers to other calls
        while this one may hold its reader idle for a while."""
        borrower = object()  # a token of its own: the task may hold one already
        try:
            if not self.can_spare(keep_free=keep_free):
                raise trio.WouldBlock
            self._reader_limiter.acquire_on_behalf_of_nowait(borrower)
        except trio.WouldBlock:
            yield None
            return
        try:
            with self._lent() as snapshot:
                yield snapshot
        finally:
            self._reader_limiter.release_on_behalf_of(borrower)

    @contextlib.contextmanager
    def _lent(self) -> Iterator[ReadSnapshot]:
        with self._borrowed_reader() as reader:
            snapshot = ReadSnapshot(reader, self.condition, self._busy_timeout_ms)
            try:
                yield snapshot
            finally:
                snapshot.end()

    @contextlib.contextmanager
    def _borrowed_reader(self) -> Iterator[apsw.Connection]:
        """A reader of the pool for the caller alone (who holds a token of ``_reader_limiter``)."""
        if not self._free_readers:
            raise StoreError("the store is closed")
        reader = self._free_readers.pop()
        try:
            yield reader
        finally:
            self._free_readers.append(reader)

    def _read_reporting(
        self, reader: apsw.Connection, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> T:
        try:
            with reporting_to(self.condition, writing=False):
                return _read_in_snapshot(reader, fn, args, kwargs)
        except apsw.BusyError:
            raise self._busy() from None

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


def readable_only_as_immutable(path: Path) -> bool:
    """Without write access to the directory SQLite cannot create the -shm file a WAL reader
    needs; with no WAL left to replay, nobody can be writing the file, so it may be read as
    immutable (a read-only mount, a directory this user may not write)."""
    return not os.access(path.parent, os.W_OK) and not _has_wal(path)


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
