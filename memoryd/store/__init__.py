"""The memory database: SQLite (apsw) with FTS5 and sqlite-vec, scoped per caller.

``Store`` opens the file and hands each caller its object: ``store.memories``
(``MemoryRepository``), ``store.jobs`` (``JobQueue``), ``store.lifecycle`` (``Lifecycle``),
``store.conversations`` (``ConversationLog``).
What a caller may see is decided in ``visibility.py``; the ranking is ``search.py``'s.

The names are imported on first use (PEP 562), so that ``memoryd.store.quick_check`` can be
imported without the whole store: the daemon's integrity check starts before the rest of
memoryd is imported (``server/head_start.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.lazy import exports_on_first_use

if TYPE_CHECKING:
    from memoryd.store.conversation_log import ConversationLog
    from memoryd.store.conversations import ExtractionJob, SessionContext, SessionRef, StoredMessage
    from memoryd.store.job_queue import JobQueue
    from memoryd.store.learned import Learned
    from memoryd.store.lifecycle import Lifecycle
    from memoryd.store.people import StoredPerson
    from memoryd.store.people_repository import AliasTaken, Forgotten, PeopleRepository, SummaryMaterial
    from memoryd.store.people_retriever import PeopleFocus
    from memoryd.store.records import EmbedJob, MemoryRecord, NewMemory, Provenance, SearchHit
    from memoryd.store.repository import MemoryRepository
    from memoryd.store.store import Store
    from memoryd.store.vectors import VectorSpace
    from memoryd.store.visibility import Scope

_EXPORTS = {
    "memoryd.store.conversation_log": ("ConversationLog",),
    "memoryd.store.conversations": ("ExtractionJob", "SessionContext", "SessionRef", "StoredMessage"),
    "memoryd.store.job_queue": ("JobQueue",),
    "memoryd.store.learned": ("Learned",),
    "memoryd.store.lifecycle": ("Lifecycle",),
    "memoryd.store.people": ("StoredPerson",),
    "memoryd.store.people_repository": ("AliasTaken", "Forgotten", "PeopleRepository", "SummaryMaterial"),
    "memoryd.store.people_retriever": ("PeopleFocus",),
    "memoryd.store.records": ("EmbedJob", "MemoryRecord", "NewMemory", "Provenance", "SearchHit"),
    "memoryd.store.repository": ("MemoryRepository",),
    "memoryd.store.store": ("Store",),
    "memoryd.store.vectors": ("VectorSpace",),
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
