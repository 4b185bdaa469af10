"""Expiry marking and gc past retention on PostgreSQL.

Each step runs in bounded batches, one short transaction each (``FOR UPDATE SKIP LOCKED``), and is
idempotent, so the maintenance task of every daemon on the database (and ``memoryd gc``) may
run them at once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg

from memoryd.ids import iso_from_ms
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres import schema

Conn = psycopg.Connection[Any]
#: Memories per transaction (the maintenance loops until a batch comes back short).
BATCH = 500
ACTOR = "memoryd"


def mark_expired_batch(conn: Conn, now_ms: int) -> int:
    found = conn.execute(
        "SELECT rowid, id, expires_at_ms, scope_key FROM memories WHERE expires_at_ms <= %s AND deleted_at_ms IS NULL "
        "AND expiry_recorded_ms IS NULL LIMIT %s FOR UPDATE SKIP LOCKED",
        (now_ms, BATCH),
    ).fetchall()
    for rowid, memory_id, expires_at_ms, key in found:
        conn.execute("UPDATE memories SET expiry_recorded_ms = %s WHERE rowid = %s", (now_ms, rowid))
        conn.execute("DELETE FROM jobs WHERE memory_rowid = %s", (rowid,))
        rows.audit(conn, key, memory_id, "expired", ACTOR, now_ms, {"expires_at": iso_from_ms(int(expires_at_ms))})
    return len(found)


def purge_counts(conn: Conn, cutoff_ms: int) -> Counter[str]:
    deleted, expired, superseded = conn.execute(
        "SELECT count(*) FILTER (WHERE deleted_at_ms <= %(c)s), "
        "count(*) FILTER (WHERE expires_at_ms <= %(c)s AND (deleted_at_ms IS NULL OR deleted_at_ms > %(c)s)), "
        "count(*) FILTER (WHERE superseded_at_ms <= %(c)s AND (deleted_at_ms IS NULL OR deleted_at_ms > %(c)s) "
        "AND (expires_at_ms IS NULL OR expires_at_ms > %(c)s)) FROM memories",
        {"c": cutoff_ms},
    ).fetchone() or (0, 0, 0)
    return Counter(deleted=int(deleted), expired=int(expired), superseded=int(superseded))


def fold_counts(conn: Conn) -> None:
    """``memory_counts`` (one row per write, schema M005) as one row: system.health sums it.  One
    daemon at a time (another gc finds the lock taken and leaves it); writes appending rows
    meanwhile are not seen by the DELETE and stay, so the sum never changes."""
    (locked,) = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (schema.MIGRATION_LOCK + 2,)).fetchone() or (
        False,
    )
    if locked:
        conn.execute(
            "WITH gone AS (DELETE FROM memory_counts RETURNING live, deleted) "
            "INSERT INTO memory_counts (live, deleted) SELECT coalesce(sum(live), 0), coalesce(sum(deleted), 0) FROM gone"
        )


def purge_batch(conn: Conn, cutoff_ms: int, now_ms: int) -> Counter[str]:
    doomed: dict[int, tuple[str, str, str]] = {}
    for reason, where in (
        ("deleted", "deleted_at_ms <= %s"),
        ("expired", "expires_at_ms <= %s"),
        ("superseded", "superseded_at_ms <= %s"),
    ):
        if len(doomed) >= BATCH:
            break
        for rowid, memory_id, key in conn.execute(
            f"SELECT rowid, id, scope_key FROM memories WHERE {where} LIMIT %s FOR UPDATE SKIP LOCKED",
            (cutoff_ms, BATCH - len(doomed)),
        ):
            doomed.setdefault(int(rowid), (memory_id, key, reason))
    if not doomed:
        return Counter()
    doomed_rowids = list(doomed)
    rows.drop_derived(conn, doomed_rowids)
    conn.execute(
        "INSERT INTO audit_events (scope_key, memory_id, event, actor, at_ms, detail) "
        "SELECT m.scope_key, m.id, 'added', m.owner, m.created_at_ms, '{}' FROM memories AS m WHERE m.rowid = ANY(%s) "
        "AND NOT EXISTS (SELECT 1 FROM audit_events AS a WHERE a.memory_id = m.id AND a.event IN ('added', 'imported'))",
        (doomed_rowids,),
    )
    conn.execute("DELETE FROM memory_people WHERE memory_rowid = ANY(%s)", (doomed_rowids,))
    conn.execute("DELETE FROM memory_attributes WHERE memory_rowid = ANY(%s)", (doomed_rowids,))
    conn.execute("DELETE FROM memories WHERE rowid = ANY(%s)", (doomed_rowids,))
    for memory_id, key, reason in doomed.values():
        rows.audit(conn, key, memory_id, "purged", ACTOR, now_ms, {"reason": reason})
    return Counter(reason for _, _, reason in doomed.values())


_PRUNABLE = (
    "FROM audit_events AS e WHERE e.memory_id IN (SELECT memory_id FROM audit_events WHERE event = 'purged' AND at_ms < %s) "
    "AND NOT EXISTS (SELECT 1 FROM memories WHERE memories.id = e.memory_id)"
)


def prune_events(conn: Conn, cutoff_ms: int) -> int:
    return int(conn.execute(f"DELETE {_PRUNABLE}", (cutoff_ms,)).rowcount)


def count_prunable_events(conn: Conn, cutoff_ms: int) -> int:
    return int((conn.execute(f"SELECT count(*) {_PRUNABLE}", (cutoff_ms,)).fetchone() or (0,))[0])
