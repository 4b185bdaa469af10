"""The store backend the configuration names (``[storage] backend``), opened for its callers.

The one module outside ``memoryd/store/sqlite/`` that imports it: the daemon, the admin
commands and the CLI open a store here and get a :class:`~memoryd.store.interfaces.Backend`.
Engines are imported on first use, so that the start-up check (``server/head_start.py``)
begins before the rest of memoryd is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from memoryd.config import Config
    from memoryd.store.admin_records import BackupReport
    from memoryd.store.interfaces import Backend, StartupCheck

#: The engines this memoryd can open (``[storage] backend``).
BACKENDS = ("sqlite", "postgres")


def _engine(config: Config) -> str:
    name = config.storage.backend
    if name not in BACKENDS:  # the config's type allows only known names: a guard, not validation
        raise StoreError(f"unknown storage backend {name!r} (known: {', '.join(BACKENDS)})")
    return name


def open_store(
    config: Config,
    *,
    readers: int | None = None,
    whole_scans: bool = False,
    readonly: bool = False,
    path: Path | None = None,
) -> Backend:
    """The store, migrated to this memoryd's schema (``readonly``: never written nor migrated).

    ``readers``: concurrent readers (default ``storage.readers``); ``whole_scans``: the caller
    reads whole tables once (the admin commands), so the engine favours a small, flat memory
    use over fast repeated reads.  ``path``: another SQLite file than the configured one."""
    if _engine(config) == "postgres":
        return open_postgres(config, readonly=readonly)
    from memoryd.store.sqlite.db.connection import MMAP_BYTES
    from memoryd.store.sqlite.store import Store

    storage = config.storage
    return Store(
        path or config.db_path,
        readers=storage.readers if readers is None else readers,
        busy_timeout_ms=storage.busy_timeout_ms,
        # No mmap for whole scans: through the bounded page cache their RSS stays flat however
        # large the file is.
        mmap_bytes=0 if whole_scans else MMAP_BYTES,
        readonly=readonly,
    )


def open_postgres(config: Config, *, readonly: bool = False, url: str | None = None) -> Backend:
    """The PostgreSQL store ``[storage] url`` names (``url``: another one, for `memoryd migrate`)."""
    import socket

    try:
        from memoryd.store.postgres import PostgresStore
        from memoryd.store.postgres.db import password_from
    except ImportError as exc:
        raise StoreError(
            f"[storage] backend = \"postgres\" needs memoryd's postgres extra: pip install 'memoryd[postgres]' ({exc})"
        ) from None
    storage = config.storage
    url = url or storage.url
    if not url:
        raise ConfigError(
            'invalid configuration: [storage] backend = "postgres" needs [storage] url (MEMORYD_STORAGE_URL), a libpq URL'
        )
    return PostgresStore(
        url,
        pool_size=storage.pool_size,
        statement_timeout_ms=storage.statement_timeout_ms,
        password=password_from(storage.password_file),
        # Stable across restarts of this daemon, distinct from the other daemons on the database.
        node=f"{socket.gethostname()}:{config.data_path}",
        readonly=readonly,
    )


def check_engine(config: Config) -> None:
    """Refuse to start on an engine this memoryd does not support (SQLite: a sqlite-vec outside
    ``sqlite/vec_support.SUPPORTED`` raises UnsupportedSqliteVec, exit status 5); once, at start,
    before the store is opened; PostgreSQL's pgvector is checked when the store opens)."""
    if _engine(config) == "postgres":
        return
    from memoryd.store.sqlite import vec_support

    vec_support.check()


def limit_cache_memory(config: Config) -> None:
    """Cap the memory the engine caches in this process (``storage.cache_mib``); once, at start."""
    if _engine(config) == "postgres":
        return  # the server caches; this process holds no pages
    from memoryd.store.sqlite.store import Store

    Store.limit_cache_memory(config.storage.cache_mib << 20)


def startup_check(config: Config) -> StartupCheck:
    """The check of the stored data that runs while the daemon starts (SQLite: quick_check;
    PostgreSQL guards its own data: nothing to check here)."""
    if _engine(config) == "postgres":
        from memoryd.store.startup_checks import NoCheck

        return NoCheck()
    from memoryd.store.sqlite.db.integrity import IntegrityCheck

    return IntegrityCheck(config.db_path, busy_timeout_ms=config.storage.busy_timeout_ms)


def backup(config: Config, target: Path, *, overwrite: bool, compact: bool = False) -> BackupReport:
    """A consistent copy of the live store at ``target`` (SQLite: the backup API, then a
    quick_check of the copy)."""
    if _engine(config) == "postgres":
        raise StoreError(
            "memoryd backup copies SQLite files; a PostgreSQL store is backed up by the database's own tools: "
            "pg_dump for a copy, continuous archiving (PITR) for point-in-time recovery (see docs/postgres.md)"
        )
    from memoryd.store.sqlite.admin import backup as sqlite_backup

    return sqlite_backup.backup(
        config.db_path, target, busy_timeout_ms=config.storage.busy_timeout_ms, overwrite=overwrite, compact=compact
    )
