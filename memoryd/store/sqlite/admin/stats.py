"""What is in the store: counts by state, scope, user and source; vectors, backlog, size.

One grouped scan of the memories table (``memoryd stats`` on 100k memories takes well under a
second); the caller adds file sizes, which are not SQL.
"""

from __future__ import annotations

from typing import Any

import apsw
import msgspec

from memoryd.store.maintenance_rules import StateTally
from memoryd.store.sqlite.conversations import extraction_jobs
from memoryd.store.sqlite.db import meta
from memoryd.store.sqlite.db.database import one
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.schema import ladder as schema
from memoryd.store.sqlite.vectors import vectors

META_LAST_MAINTENANCE = "maintenance_last"

#: A memory's state; the first that applies wins (a deleted superseded memory is deleted).
STATE_SQL = """
    CASE WHEN deleted_at_ms IS NOT NULL THEN 'deleted'
         WHEN superseded_by IS NOT NULL THEN 'superseded'
         WHEN expires_at_ms IS NOT NULL AND expires_at_ms <= ? THEN 'expired'
         ELSE 'active' END
"""


def collect(db: apsw.Connection, now_ms: int) -> dict[str, Any]:
    tally = StateTally()
    tally.add(
        db.execute(
            f"SELECT owner, shared, source, {STATE_SQL} AS state, count(*) FROM memories GROUP BY 1, 2, 3, 4",
            (now_ms,),
        )
    )
    (chats,) = one(db, "SELECT count(DISTINCT chat_id) FROM memories WHERE shared = 1 AND deleted_at_ms IS NULL")
    accessed, hits = one(db, "SELECT count(*), coalesce(sum(access_count), 0) FROM memories WHERE access_count > 0")
    space = vectors.read_space(db)
    embedded = 0
    if space is not None:
        (embedded,) = one(
            db,
            "SELECT count(*) FROM memories WHERE vector_gen = ? AND deleted_at_ms IS NULL",
            (space.generation,),
        )
    (failing,) = one(db, "SELECT count(*) FROM jobs WHERE attempts > 0")
    (last_error,) = one(db, "SELECT max(last_error) FROM jobs WHERE last_error IS NOT NULL")
    page_size = int(db.pragma("page_size"))
    return {
        "schema_version": schema.schema_version(db),
        **tally.report(chats=chats, accessed=accessed, hits=hits),
        "embedding": {
            "model": space.model if space is not None else None,
            "dim": space.dim if space is not None else None,
            "generation": space.generation if space is not None else None,
            "embedded": int(embedded),
            "reindex_requested": _reindex_target(db),
        },
        "backlog": {**jobs.backlog(db), "failing": int(failing), "last_error": last_error},
        "extraction": extraction_jobs.status(db),
        "pages": {
            "page_size": page_size,
            "pages": int(db.pragma("page_count")),
            "free_pages": int(db.pragma("freelist_count")),
        },
        "last_maintenance": last_maintenance(db),
    }


def _reindex_target(db: apsw.Connection) -> str | None:
    target = vectors.read_reindex_target(db)
    if target is None:
        return None
    model, dim = target
    return model if dim is None else f"{model} (dim {dim})"


def record_maintenance(db: apsw.Connection, summary: dict[str, object]) -> None:
    """Remember the last maintenance run (shown by `memoryd stats`)."""
    meta.put(db, META_LAST_MAINTENANCE, msgspec.json.encode(summary).decode())


def last_maintenance(db: apsw.Connection) -> dict[str, object] | None:
    value = meta.get(db, META_LAST_MAINTENANCE)
    if value is None:
        return None
    decoded = msgspec.json.decode(value)
    return decoded if isinstance(decoded, dict) else None


def health_counts(db: apsw.Connection, now_ms: int) -> dict[str, int]:
    """The few numbers ``system.health`` shows (through an index: no content pages read)."""
    active, expired, deleted = one(
        db,
        """
        SELECT coalesce(sum(deleted_at_ms IS NULL AND (expires_at_ms IS NULL OR expires_at_ms > ?1)), 0),
               coalesce(sum(deleted_at_ms IS NULL AND expires_at_ms <= ?1), 0),
               coalesce(sum(deleted_at_ms IS NOT NULL), 0)
        FROM memories INDEXED BY memories_health
        """,
        (now_ms,),
    )
    (users,) = one(
        db, "SELECT count(DISTINCT owner) FROM memories INDEXED BY memories_health WHERE deleted_at_ms IS NULL"
    )
    return {
        "memories_active": int(active),
        "memories_expired": int(expired),
        "memories_deleted": int(deleted),
        "users": int(users),
    }
