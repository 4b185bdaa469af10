"""The PostgreSQL schema, as versioned migrations run once under an advisory lock.

Several daemons starting at once on an empty database take the same transaction-level advisory
lock: the first migrates, the others wait, then find nothing left to do.  Each migration is
plain SQL in its own module under ``migrations/`` (it never imports live code, so editing
today's modules cannot change yesterday's migrations).

Ready to shard by scope (Citus ``create_distributed_table(..., 'scope_key')``): every per-scope
table has the scope key in its primary key and its unique constraints, memory ids are generated
by the daemon, and nothing references another scope's rows by a foreign key.  People belong to
their owner's personal scope key; ``memory_people`` links rows by key values only.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from memoryd.errors import StoreRefused
from memoryd.store.postgres.migrations.m001_tables import SQL as M001
from memoryd.store.postgres.migrations.m002_pins_and_eviction_indexes import SQL as M002
from memoryd.store.postgres.migrations.m003_rowid_indexes import SQL as M003
from memoryd.store.postgres.migrations.m004_halfvec_hnsw import SQL as M004
from memoryd.store.postgres.migrations.m005_memory_counts import SQL as M005
from memoryd.store.postgres.migrations.m006_vector_storage import SQL as M006

log = logging.getLogger("memoryd.store")

#: The lock every migrating daemon takes (pg_advisory_xact_lock's key).
MIGRATION_LOCK = 0x6D656D6F7279  # "memory"


#: Migration n is MIGRATIONS[n - 1].
MIGRATIONS: tuple[str, ...] = (M001, M002, M003, M004, M005, M006)


def migrate(conn: psycopg.Connection[Any]) -> int:
    """Bring the schema to this memoryd's version, once across daemons; the version."""
    with conn.transaction():
        # A migration may build an index over every row (minutes on a big store): neither it nor
        # the daemons waiting for its lock give up after the configured statement_timeout.
        conn.execute("SET LOCAL statement_timeout = 0")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memoryd_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        (version,) = conn.execute("SELECT coalesce(max(version), 0) FROM memoryd_schema").fetchone() or (0,)
        if version > len(MIGRATIONS):
            raise StoreRefused(
                f"the database has schema v{version} and this memoryd knows v{len(MIGRATIONS)}: upgrade memoryd"
            )
        for number in range(version + 1, len(MIGRATIONS) + 1):
            conn.execute(MIGRATIONS[number - 1])
            conn.execute("INSERT INTO memoryd_schema (version) VALUES (%s)", (number,))
            log.info("store: PostgreSQL schema migrated to v%d", number)
    return len(MIGRATIONS)


def schema_version(conn: psycopg.Connection[Any]) -> int:
    exists = conn.execute("SELECT to_regclass('memoryd_schema') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    return int((conn.execute("SELECT coalesce(max(version), 0) FROM memoryd_schema").fetchone() or (0,))[0])
