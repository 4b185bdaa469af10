"""Memory counts on PostgreSQL: ``system.health``'s tallies, and the read hits that search,
list and get add to each memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

Conn = psycopg.Connection[Any]


#: The owners of live memories, counted by stepping from one to the next through memories_owner
#: (one index probe per owner): count(DISTINCT owner) sorts every live row, about 0.4-0.9 s at a
#: million memories against 30-45 ms this way for ten thousand owners.
_OWNERS = (
    "WITH RECURSIVE o(owner) AS ("
    "(SELECT owner FROM memories WHERE deleted_at_ms IS NULL ORDER BY owner LIMIT 1) "
    "UNION ALL SELECT (SELECT m.owner FROM memories AS m WHERE m.deleted_at_ms IS NULL AND m.owner > o.owner "
    "ORDER BY m.owner LIMIT 1) FROM o WHERE o.owner IS NOT NULL) "
    "SELECT count(owner) FROM o"
)


def health_counts(conn: Conn, now_ms: int) -> dict[str, Any]:
    """Exact counts without reading every row: live and deleted memories from ``memory_counts``
    (the writes' own tallies, schema M005), the expired among the live through the expiry index
    (only memories given an expiry), the users through the owner index."""
    live, deleted, expired, users = conn.execute(
        "SELECT t.live, t.deleted, "
        "(SELECT count(*) FROM memories WHERE expires_at_ms <= %s AND deleted_at_ms IS NULL), "
        f"({_OWNERS}) FROM (SELECT coalesce(sum(live), 0), coalesce(sum(deleted), 0) FROM memory_counts) AS t(live, deleted)",
        (now_ms,),
    ).fetchone() or (0, 0, 0, 0)
    (size,) = conn.execute("SELECT pg_database_size(current_database())").fetchone() or (0,)
    return {
        "memories_active": int(live) - int(expired),
        "memories_expired": int(expired),
        "memories_deleted": int(deleted),
        "users": int(users),
        "db_bytes": int(size),
    }


def write_hits(conn: Conn, entries: Sequence[tuple[str, int, int]]) -> int:
    """(memory id, count, last_ms) per memory read by search, list or get."""
    if not entries:
        return 0
    conn.execute(
        "UPDATE memories AS m SET access_count = m.access_count + h.n, last_access_ms = greatest(coalesce(m.last_access_ms, 0), h.at) "
        "FROM unnest(%s::text[], %s::int[], %s::bigint[]) AS h(id, n, at) WHERE m.id = h.id",
        ([e[0] for e in entries], [e[1] for e in entries], [e[2] for e in entries]),
    )
    return len(entries)
