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
    "AliasTaken": "memoryd.store.people_repository",
    "ConversationLog": "memoryd.store.conversation_log",
    "EmbedJob": "memoryd.store.records",
    "ExtractionJob": "memoryd.store.conversations",
    "Forgotten": "memoryd.store.people_repository",
    "JobQueue": "memoryd.store.job_queue",
    "Learned": "memoryd.store.learned",
    "Lifecycle": "memoryd.store.lifecycle",
    "MemoryRecord": "memoryd.store.records",
    "MemoryRepository": "memoryd.store.repository",
    "NewMemory": "memoryd.store.records",
    "PeopleFocus": "memoryd.store.people_retriever",
    "PeopleRepository": "memoryd.store.people_repository",
    "Provenance": "memoryd.store.records",
    "Scope": "memoryd.store.visibility",
    "SearchHit": "memoryd.store.records",
    "SessionContext": "memoryd.store.conversations",
    "SessionRef": "memoryd.store.conversations",
    "Store": "memoryd.store.store",
    "StoredMessage": "memoryd.store.conversations",
    "StoredPerson": "memoryd.store.people",
    "SummaryMaterial": "memoryd.store.people_repository",
    "VectorSpace": "memoryd.store.vectors",
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
