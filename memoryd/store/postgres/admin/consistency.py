"""``memoryd check`` on PostgreSQL: vectors and jobs that outlived their memories, live memories
with neither a vector nor an embed job; and their repair.  The server guards its own pages."""

from __future__ import annotations

from typing import Any

import psycopg

from memoryd.store.admin_records import Finding
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows

Conn = psycopg.Connection[Any]


#: Vectors of deleted, superseded or gone memories (counted by ``check``, removed by ``repair``).
_STALE_VECTORS = (
    "FROM memory_vectors AS v WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.scope_key = v.scope_key "
    "AND m.rowid = v.rowid AND m.deleted_at_ms IS NULL AND m.superseded_by IS NULL)"
)
#: Jobs of deleted or gone memories.
_ORPHANED_JOBS = (
    "FROM jobs AS j WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.scope_key = j.scope_key "
    "AND m.rowid = j.memory_rowid AND m.deleted_at_ms IS NULL)"
)


def _count(conn: Conn, query: str, params: tuple[Any, ...] = ()) -> int:
    return int((conn.execute(query, params).fetchone() or (0,))[0])


def _finding(check: str, bad: int, ok: str, wrong: str) -> Finding:
    """``ok`` when nothing is ``bad``; else ``wrong`` (with the count in front), repairable."""
    return Finding(check, True, ok) if not bad else Finding(check, False, f"{bad} {wrong}", bad, True)


def check(conn: Conn, now_ms: int) -> list[Finding]:
    findings = [
        Finding("postgres", True, "the database answered"),
        _finding(
            "vectors",
            _count(conn, f"SELECT count(*) {_STALE_VECTORS}"),
            "every vector belongs to a live memory",
            "vectors of deleted, superseded or gone memories",
        ),
        _finding(
            "jobs",
            _count(conn, f"SELECT count(*) {_ORPHANED_JOBS}"),
            "every job belongs to a live memory",
            "jobs of deleted or gone memories",
        ),
    ]
    generation = rows.vector_generation(conn)
    if generation is not None:
        unqueued = _count(
            conn,
            "SELECT count(*) FROM memories AS m WHERE m.deleted_at_ms IS NULL AND m.superseded_by IS NULL "
            "AND (m.expires_at_ms IS NULL OR m.expires_at_ms > %s) AND NOT EXISTS (SELECT 1 FROM memory_vectors AS v "
            "WHERE v.scope_key = m.scope_key AND v.rowid = m.rowid AND v.generation = %s) AND NOT EXISTS "
            "(SELECT 1 FROM jobs AS j WHERE j.scope_key = m.scope_key AND j.memory_rowid = m.rowid AND j.kind = 'embed')",
            (now_ms, generation),
        )
        findings.append(
            _finding(
                "vectors.queue",
                unqueued,
                "every live memory has a vector or an embed job",
                "live memories have no vector and no embed job",
            )
        )
    return findings


def repair(conn: Conn, findings: list[Finding], now_ms: int) -> list[str]:
    done: list[str] = []
    wanted = {f.check for f in findings if not f.ok and f.repairable}
    if "vectors" in wanted:
        done.append(f"removed {conn.execute(f'DELETE {_STALE_VECTORS}').rowcount} stale vectors")
    if "jobs" in wanted:
        done.append(f"removed {conn.execute(f'DELETE {_ORPHANED_JOBS}').rowcount} orphaned jobs")
    if "vectors.queue" in wanted:
        done.append(f"queued {job_rows.enqueue_missing(conn, now_ms)} embed jobs")
    return done
