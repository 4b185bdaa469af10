"""The oldest PostgreSQL server and pgvector extension this backend runs on, checked at start-up."""

from __future__ import annotations

import re
from typing import Any

import psycopg

from memoryd.errors import StoreRefused

#: Oldest server and pgvector this backend runs on.
MIN_SERVER = 15
MIN_VECTOR = (0, 8)


def check_versions(conn: psycopg.Connection[Any]) -> tuple[int, str]:
    """(server major version, pgvector version); StoreRefused for older ones."""
    (server,) = conn.execute("SHOW server_version_num").fetchone() or ("0",)
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    installed = row[0] if row else None
    row = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    available = row[0] if row else None
    server = int(server)
    major = server // 10000
    if major < MIN_SERVER:
        raise StoreRefused(f"PostgreSQL {major} is too old: memoryd needs PostgreSQL {MIN_SERVER} or newer")
    version = installed or available
    if version is None:
        raise StoreRefused(
            "the pgvector extension is not available on the PostgreSQL server: install pgvector "
            f"{'.'.join(map(str, MIN_VECTOR))} or newer (see docs/postgres.md)"
        )
    if _version_tuple(version) < MIN_VECTOR:
        raise StoreRefused(
            f"pgvector {version} is too old: memoryd needs pgvector {'.'.join(map(str, MIN_VECTOR))} or newer "
            "(ALTER EXTENSION vector UPDATE, after installing a newer package)"
        )
    return major, version


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])
