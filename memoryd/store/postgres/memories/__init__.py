"""memory.* on PostgreSQL: the rows (``memories.py``: add, insert, list, soft-delete), memories
by id (``lookup.py``: get, delete, pin, short ids) and the counts (``counts.py``: health, hits).

The engine's other modules use these names from here (``from memoryd.store.postgres import
memories as rows``).
"""

from memoryd.store.memory_rules import content_hash
from memoryd.store.postgres.memories.counts import health_counts, write_hits
from memoryd.store.postgres.memories.lookup import (
    delete,
    fetch_visible,
    get,
    hide_unseen_successors,
    pin,
    resolve,
    short_ids,
)
from memoryd.store.postgres.memories.memories import (
    EMBED,
    RECORD_COLUMNS,
    SUPERSEDE,
    Added,
    Conn,
    add,
    audit,
    drop_derived,
    enqueue,
    fetch,
    insert,
    insert_many,
    list_visible,
    mark_deleted,
    record,
    unused_id,
    vector_generation,
)

__all__ = [
    "EMBED",
    "RECORD_COLUMNS",
    "SUPERSEDE",
    "Added",
    "Conn",
    "add",
    "audit",
    "content_hash",
    "delete",
    "drop_derived",
    "enqueue",
    "fetch",
    "fetch_visible",
    "get",
    "health_counts",
    "hide_unseen_successors",
    "insert",
    "insert_many",
    "list_visible",
    "mark_deleted",
    "pin",
    "record",
    "resolve",
    "short_ids",
    "unused_id",
    "vector_generation",
    "write_hits",
]
