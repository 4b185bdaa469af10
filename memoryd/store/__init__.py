"""The memory database: SQLite (apsw) with FTS5 and sqlite-vec, scoped per caller.

``Store`` opens the file and hands each caller its object: ``store.memories``
(``MemoryRepository``), ``store.jobs`` (``JobQueue``), ``store.lifecycle`` (``Lifecycle``),
``store.conversations`` (``ConversationLog``).
What a caller may see is decided in ``visibility.py``; the ranking is ``search.py``'s.

The names are imported on first use (PEP 562), so that ``memoryd.store.sqlite.db.quick_check`` can be
imported without the whole store: the daemon's integrity check starts before the rest of
memoryd is imported (``server/head_start.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.lazy import exports_on_first_use

if TYPE_CHECKING:
    from memoryd.store.sqlite.conversations.conversation_log import ConversationLog
    from memoryd.store.sqlite.conversations.conversations import ExtractionJob, SessionContext, SessionRef, StoredMessage
    from memoryd.store.sqlite.jobs.job_queue import JobQueue
    from memoryd.store.sqlite.conversations.learned import Learned
    from memoryd.store.sqlite.admin.lifecycle import Lifecycle
    from memoryd.store.sqlite.people.people import StoredPerson
    from memoryd.store.sqlite.people.people_repository import AliasTaken, Forgotten, PeopleRepository, SummaryMaterial
    from memoryd.store.sqlite.search.people_retriever import PeopleFocus
    from memoryd.store.records import EmbedJob, MemoryRecord, NewMemory, Provenance, SearchHit
    from memoryd.store.sqlite.memories.repository import MemoryRepository
    from memoryd.store.sqlite.store import Store
    from memoryd.store.sqlite.vectors.vectors import VectorSpace
    from memoryd.store.visibility import Scope

_EXPORTS = {
    "memoryd.store.sqlite.conversations.conversation_log": ("ConversationLog",),
    "memoryd.store.sqlite.conversations.conversations": ("ExtractionJob", "SessionContext", "SessionRef", "StoredMessage"),
    "memoryd.store.sqlite.jobs.job_queue": ("JobQueue",),
    "memoryd.store.sqlite.conversations.learned": ("Learned",),
    "memoryd.store.sqlite.admin.lifecycle": ("Lifecycle",),
    "memoryd.store.sqlite.people.people": ("StoredPerson",),
    "memoryd.store.sqlite.people.people_repository": ("AliasTaken", "Forgotten", "PeopleRepository", "SummaryMaterial"),
    "memoryd.store.sqlite.search.people_retriever": ("PeopleFocus",),
    "memoryd.store.records": ("EmbedJob", "MemoryRecord", "NewMemory", "Provenance", "SearchHit"),
    "memoryd.store.sqlite.memories.repository": ("MemoryRepository",),
    "memoryd.store.sqlite.store": ("Store",),
    "memoryd.store.sqlite.vectors.vectors": ("VectorSpace",),
    "memoryd.store.visibility": ("Scope",),
}

__getattr__ = exports_on_first_use(__name__, _EXPORTS)

__all__ = [
    "AliasTaken",
    "ConversationLog",
    "ExtractionJob",
    "Forgotten",
    "Learned",
    "PeopleFocus",
    "PeopleRepository",
    "SessionContext",
    "SessionRef",
    "StoredMessage",
    "StoredPerson",
    "SummaryMaterial",
    "EmbedJob",
    "JobQueue",
    "Lifecycle",
    "MemoryRecord",
    "MemoryRepository",
    "NewMemory",
    "Provenance",
    "Scope",
    "SearchHit",
    "Store",
    "VectorSpace",
]
