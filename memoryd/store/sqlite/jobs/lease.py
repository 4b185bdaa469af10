"""How a job is leased, for every queue table (``jobs``: embed and supersede; ``extraction_jobs``).

A claim takes due jobs that nobody holds and leases each until ``now + lease``: a worker that
dies holding one loses nothing, since a lease that ran out makes the job claimable again.
Claims run in the write transaction, so two claims never take the same job (one writer), and a
finished or failed job releases its lease in the same transaction as its effects.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw


def claimable(alias: str = "") -> str:
    """The WHERE condition of a job that may be claimed now: due and held by nobody (never
    leased, or its lease ran out).  Binds ``(now_ms, now_ms)``."""
    column = f"{alias}." if alias else ""
    return f"{column}due_at_ms <= ? AND ({column}leased_until_ms IS NULL OR {column}leased_until_ms <= ?)"


def take(db: apsw.Connection, table: str, key_column: str, keys: Iterable[object], until_ms: int) -> None:
    """Lease the jobs ``keys`` of ``table`` until ``until_ms`` (our own table names: safe SQL)."""
    db.executemany(f"UPDATE {table} SET leased_until_ms = ? WHERE {key_column} = ?", [(until_ms, key) for key in keys])


def release_all(db: apsw.Connection, table: str) -> None:
    """At start-up: nothing can still be working on a job claimed by a previous run."""
    db.execute(f"UPDATE {table} SET leased_until_ms = NULL WHERE leased_until_ms IS NOT NULL")


def next_claimable_ms(db: apsw.Connection, table: str, where: str, params: tuple[object, ...] = ()) -> int | None:
    """When the next job of ``table`` matching ``where`` can be claimed: its due time, or the end
    of its lease if later; None when there is none."""
    row = db.execute(
        f"SELECT min(max(due_at_ms, coalesce(leased_until_ms, 0))) FROM {table} WHERE {where}", params
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])
