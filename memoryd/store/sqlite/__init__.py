"""The SQLite backend: apsw, FTS5 and sqlite-vec; every SQL statement memoryd runs on SQLite lives
below this package.  ``Store`` is its ``interfaces.Backend``; open it through
``memoryd.store.backends`` (tests and benchmarks may open it directly).

The names are imported on first use (PEP 562): the start-up check imports ``db.integrity``
before the rest of memoryd.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.lazy import exports_on_first_use

if TYPE_CHECKING:
    from memoryd.store.sqlite.admin.lifecycle import Lifecycle
    from memoryd.store.sqlite.conversations.conversation_log import ConversationLog
    from memoryd.store.sqlite.jobs.job_queue import JobQueue
    from memoryd.store.sqlite.memories.repository import MemoryRepository
    from memoryd.store.sqlite.people.people_repository import PeopleRepository
    from memoryd.store.sqlite.store import Store
    from memoryd.store.sqlite.supersession.supersession_repository import Supersessions
    from memoryd.store.sqlite.vectors.vectors import VectorSpace

_EXPORTS = {
    "memoryd.store.sqlite.admin.lifecycle": ("Lifecycle",),
    "memoryd.store.sqlite.conversations.conversation_log": ("ConversationLog",),
    "memoryd.store.sqlite.jobs.job_queue": ("JobQueue",),
    "memoryd.store.sqlite.memories.repository": ("MemoryRepository",),
    "memoryd.store.sqlite.people.people_repository": ("PeopleRepository",),
    "memoryd.store.sqlite.store": ("Store",),
    "memoryd.store.sqlite.supersession.supersession_repository": ("Supersessions",),
    "memoryd.store.sqlite.vectors.vectors": ("VectorSpace",),
}

__getattr__ = exports_on_first_use(__name__, _EXPORTS)

__all__ = [
    "ConversationLog",
    "JobQueue",
    "Lifecycle",
    "MemoryRepository",
    "PeopleRepository",
    "Store",
    "Supersessions",
    "VectorSpace",
]
