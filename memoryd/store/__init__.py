"""The memory database: SQLite (apsw) with FTS5 and sqlite-vec, scoped per caller.

``Store`` opens the file and hands each caller its object: ``store.memories``
(``MemoryRepository``), ``store.jobs`` (``JobQueue``), ``store.lifecycle`` (``Lifecycle``),
``store.conversations`` (``ConversationLog``).
What a caller may see is decided in ``visibility.py``; the ranking is ``search.py``'s.
"""

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
