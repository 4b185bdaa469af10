"""Start-up checks of the data directory, so a bad disk stops the daemon with one clear line.

Before SQLite sees the file: the directory must exist and take a written page (a read-only
mount, missing permissions and a full disk all fail here, in the OS's own words, naming the
path), and a zero-length database is refused where it is not a brand-new store.  Opening the
store then turns SQLite's failures into the same errors.  The exit statuses belong to the
errors (``StorageUnusable`` 3, ``StoreRefused`` 4).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

from memoryd.errors import DiskFull, StorageUnusable, StoreCorrupt, StoreError, StoreRefused
from memoryd.log import fields

log = logging.getLogger("memoryd.daemon")

#: One database page: a disk that cannot take this much cannot take an add.
PROBE_BYTES = 4096
#: Files SQLite itself leaves next to a database it only just created.
_COMPANIONS = ("-wal", "-shm", "-journal")


def prepare(data_dir: Path, db_path: Path, *, accept_empty_db: bool = False) -> None:
    """Create ``data_dir`` if needed and make sure the store can be written there."""
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise _unusable(data_dir, exc) from None
    warn_if_others_can_read(data_dir)
    _probe_write(data_dir)
    warn_if_others_can_read(db_path)
    if db_path.exists():
        try:
            os.close(os.open(db_path, os.O_RDWR | os.O_CLOEXEC))
        except OSError as exc:
            raise _unusable(db_path, exc) from None
        refuse_unexpectedly_empty(db_path, accept_empty_db)


def opening_failure(db_path: Path, exc: StoreError) -> StoreRefused | StorageUnusable | None:
    """The start-up error for a store that failed to open, or None when it is none of ours."""
    if isinstance(exc, DiskFull):
        return StorageUnusable(db_path, os.strerror(errno.ENOSPC), errno.ENOSPC)
    if isinstance(exc, StoreCorrupt):
        return StoreRefused(f"{db_path}: {exc}; {RESTORE_ADVICE}")
    return None


RESTORE_ADVICE = (
    "not serving it: run `memoryd check` for details, then restore a copy made by "
    "`memoryd backup` (stop the daemon, put it in place as memoryd.db, remove memoryd.db-wal/-shm)"
)


def warn_if_others_can_read(path: Path) -> None:
    """Memories are personal: a data directory other users may enter, or a database file they
    may read (one made before memoryd created its files 0600), is worth a warning."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    if mode & (stat.S_IROTH | stat.S_IXOTH):
        log.warning(
            "data_dir.readable_by_others: chmod go-rwx it (memories are personal)",
            extra=fields(path=str(path), mode=oct(stat.S_IMODE(mode))),
        )


def _probe_write(data_dir: Path) -> None:
    probe = data_dir / f".memoryd-write-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise _unusable(data_dir, exc) from None
    try:
        os.write(fd, b"\0" * PROBE_BYTES)
    except OSError as exc:
        raise _unusable(data_dir, exc) from None
    finally:
        os.close(fd)
        try:
            probe.unlink()
        except OSError as exc:  # a probe we could create but not remove: odd, not fatal
            log.warning("data_dir.probe_left", extra=fields(path=str(probe), error=str(exc)))


def refuse_unexpectedly_empty(db_path: Path, accept_empty_db: bool = False) -> None:
    """A zero-length database in a directory with other files is more likely a truncated
    store (a failed copy, a full disk) than a new one: serving it would start an empty store
    over the remains of the old one."""
    if db_path.stat().st_size > 0 or accept_empty_db:
        return
    companions = {db_path.name + suffix for suffix in _COMPANIONS}
    others = sorted(
        entry.name
        for entry in db_path.parent.iterdir()
        if entry.name != db_path.name
        and not (entry.name in companions and entry.stat().st_size == 0)
        and not entry.name.startswith(".memoryd-write-probe-")
    )
    if others:
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        raise StoreRefused(
            f"{db_path} is empty (0 bytes) but its directory holds other files ({shown}): it may be a "
            "truncated store. Restore a backup, or start a new store with `memoryd serve --accept-empty-db`"
        )


def _unusable(path: Path, exc: OSError) -> StorageUnusable:
    cause = os.strerror(exc.errno) if exc.errno else str(exc)
    return StorageUnusable(path, cause, exc.errno)
