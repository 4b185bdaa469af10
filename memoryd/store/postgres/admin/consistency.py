"""``memoryd check`` on PostgreSQL: vectors and jobs that outlived their memories, live memories
with neither a vector nor an embed job; and their repair.  The server guards its own pages."""

from __future__ import annotations

from typing import Any

import psycopg

from memoryd.store.admin_records import Finding
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows

Conn = psycopg.Connection[Any]


def check(conn: Conn, now_ms: int) -> list[Finding]:
    findings = [Finding("postgres", True, "the database answered")]
    (stale,) = conn.execute(
        "SELECT count(*) FROM memory_vectors AS v WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.scope_key = v.scope_key "
        "AND m.rowid = v.rowid AND m.deleted_at_ms IS NULL AND m.superseded_by IS NULL)"
    ).fetchone() or (0,)
    findings.append(
        Finding("vectors", True, "every vector belongs to a live memory")
        if not stale
        else Finding("vectors", False, f"{stale} vectors of deleted, superseded or gone memories", int(stale), True)
    )
    (orphans,) = conn.execute(
        "SELECT count(*) FROM jobs AS j WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.scope_key = j.scope_key "
        "AND m.rowid = j.memory_rowid AND m.deleted_at_ms IS NULL)"
    ).fetchone() or (0,)
    findings.append(
        Finding("jobs", True, "every job belongs to a live memory")
        if not orphans
        else Finding("jobs", False, f"{orphans} jobs of deleted or gone memories", int(orphans), True)
    )
    generation = rows.vector_generation(conn)
    if generation is not None:
        (unqueued,) = conn.execute(
            "SELECT count(*) FROM memories AS m WHERE m.deleted_at_ms IS NULL AND m.superseded_by IS NULL "
            "AND (m.expires_at_ms IS NULL OR m.expires_at_ms > %s) AND NOT EXISTS (SELECT 1 FROM memory_vectors AS v "
            "WHERE v.scope_key = m.scope_key AND v.rowid = m.rowid AND v.generation = %s) AND NOT EXISTS "
            "(SELECT 1 FROM jobs AS j WHERE j.scope_key = m.scope_key AND j.memory_rowid = m.rowid AND j.kind = 'embed')",
            (now_ms, generation),
        ).fetchone() or (0,)
        findings.append(
            Finding("vectors.queue", True, "every live memory has a vector or an embed job")
            if not unqueued
            else Finding(
                "vectors.queue", False, f"{unqueued} live memories have no vector and no embed job", int(unqueued), True
            )
        )
    return findings


def repair(conn: Conn, findings: list[Finding], now_ms: int) -> list[str]:
    done: list[str] = []
    wanted = {f.check for f in findings if not f.ok and f.repairable}
    if "vectors" in wanted:
        n = conn.execute(
            "DELETE FROM memory_vectors AS v WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.scope_key = v.scope_key "
            "AND m.rowid = v.rowid AND m.deleted_at_ms IS NULL AND m.superseded_by IS NULL)"
        ).rowcount
        done.append(f"removed {n} stale vectors")
    if "jobs" in wanted:
        n = conn.execute(
            "DELETE FROM jobs AS j WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.scope_key = j.scope_key "
            "AND m.rowid = j.memory_rowid AND m.deleted_at_ms IS NULL)"
        ).rowcount
        done.append(f"removed {n} orphaned jobs")
    if "vectors.queue" in wanted:
        done.append(f"queued {job_rows.enqueue_missing(conn, now_ms)} embed jobs")
    return done
