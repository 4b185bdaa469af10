"""Errors that stop start-up: bad configuration, and a daemon that cannot serve (with its exit status)."""

from __future__ import annotations

from typing import ClassVar

from memoryd.errors.base import MemorydError


class ConfigError(MemorydError):
    """The configuration is wrong; the message names the key and what was wrong."""


class StartupError(MemorydError):
    """The daemon cannot start (socket held by a live daemon, unwritable data dir, ...).

    ``exit_status`` is what `memoryd serve` exits with (documented in the README), so a
    service manager can tell a failure that a restart may cure from one that needs a person.
    """

    exit_status: ClassVar[int] = 1


class StorageUnusable(StartupError):
    """The data directory or the database file cannot be created, opened or written: a
    read-only mount, missing permissions, a full disk.  The message names the path and the
    cause (the OS's own words)."""

    exit_status = 3

    def __init__(self, path: object, cause: str, errno: int | None = None) -> None:
        super().__init__(f"{path}: {cause}")
        self.path = path
        self.cause = cause
        #: The errno behind ``cause`` when one is known (sent to systemd as ERRNO=).
        self.errno = errno


class StoreRefused(StartupError):
    """The database is damaged (the start-up integrity check failed) or is an empty file
    where a store was expected: serving it could lose or hide memories."""

    exit_status = 4


class UnsupportedSqliteVec(StartupError):
    """The installed sqlite-vec is outside the versions this memoryd supports
    (``store/sqlite/vec_support.py``): a restart cannot mend it, installing a supported version can."""

    exit_status = 5
