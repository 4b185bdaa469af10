"""The per-scope lock of read-modify-write decisions (an add's dedupe and cap, supersession,
eviction), shared by every daemon on the database."""

from __future__ import annotations

from typing import Any

import psycopg


def lock_scope(conn: psycopg.Connection[Any], scope_key: str) -> None:
    """Serialize read-modify-write decisions on one scope across daemons, until this
    transaction ends (never a session lock: pooled connections outlive a call)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (scope_key,))
