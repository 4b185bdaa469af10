"""Online backup through SQLite's backup API, safe while the daemon serves.

The copy is made in ONE backup step, i.e. inside one read transaction on the source: under
WAL that snapshot is consistent and does not block the daemon's writers (a multi-step backup
would restart whenever another connection writes).  It is written to ``PATH.partial``,
checked with ``quick_check``, fsynced and renamed into place, so ``PATH`` is either absent or a
complete, verified database.  Restoring = stopping the daemon and putting the file in place
as ``<data_dir>/memoryd.db`` (removing any stale ``-wal``/``-shm`` files next to it).

``compact``: the copy is made with ``VACUUM INTO`` (one read snapshot too) and holds only the
pages in use, packed: how a store that an upgrade left with free pages (m011 and m012 free ~250
bytes per memory) gets a file of its new size without stopping the daemon for a VACUUM.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import apsw

from memoryd.errors import StoreError
from memoryd.store.admin_records import BackupReport
from memoryd.store.sqlite.db.connection import create_private_file
from memoryd.store.sqlite.db.database import open_connection, readable_only_as_immutable


def _fsync(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def backup(
    source_path: Path, target: Path, *, busy_timeout_ms: int, overwrite: bool = False, compact: bool = False
) -> BackupReport:
    started = time.perf_counter()
    target = Path(target)
    if target.exists() and not overwrite:
        raise StoreError(f"{target} exists; remove it or pass --force")
    if not source_path.exists():
        raise StoreError(f"no database at {source_path}")
    partial = target.with_name(target.name + ".partial")
    _remove(partial)
    try:
        pages = _copy(source_path, partial, busy_timeout_ms, compact=compact)
        _fsync(partial)
    except BaseException:
        _remove(partial)
        raise
    os.replace(partial, target)
    _fsync(target.parent, directory=True)
    return BackupReport(target, pages, target.stat().st_size, time.perf_counter() - started)


def _remove(partial: Path) -> None:
    for path in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
        path.unlink(missing_ok=True)


def _copy(source_path: Path, partial: Path, busy_timeout_ms: int, *, compact: bool) -> int:
    """Copy the database into ``partial`` from one read snapshot; its page count.  ``compact``:
    VACUUM INTO, which writes only the pages in use (a store whose upgrades freed pages gets a
    file of its new size); else the backup API, page for page."""
    # No mmap: the copy streams through the page cache, so RSS stays small for any file size.
    source = open_connection(
        source_path,
        busy_timeout_ms=busy_timeout_ms,
        readonly=True,
        mmap_bytes=0,
        immutable=readable_only_as_immutable(source_path),
    )
    try:
        if compact:
            create_private_file(partial)  # VACUUM INTO takes an empty file; this one is 0600 whatever the umask
            source.execute("VACUUM INTO ?", (str(partial),))
        dest = open_connection(partial, busy_timeout_ms=busy_timeout_ms, readonly=compact, mmap_bytes=0)
        try:
            if not compact:
                with dest.backup("main", source, "main") as step:
                    step.step(-1)  # everything at once: one consistent snapshot
                # The copy carries the source's WAL mode; fold the WAL so the file stands alone.
                dest.pragma("wal_checkpoint", "TRUNCATE")
            _quick_check(dest)
            return int(dest.pragma("page_count"))
        finally:
            dest.close()
    except apsw.FullError:
        # The backup step reports SQLITE_FULL with the message "not an error": name the cause.
        raise StoreError(f"backup failed: {partial.parent}: {os.strerror(errno.ENOSPC)}") from None
    except apsw.Error as exc:
        raise StoreError(f"backup failed: {exc}") from exc
    finally:
        source.close()


def _quick_check(copy: apsw.Connection) -> None:
    verdict = copy.pragma("quick_check")
    if verdict != "ok":
        raise StoreError(f"the backup copy failed its quick_check: {verdict}")
