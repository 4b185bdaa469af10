"""The memory store, whatever engine holds it: interfaces, records, and the rules every engine shares.

The service layer talks to a store only through the interfaces (``interfaces/``: ``Backend``,
``MemoryStore``, ``PeopleStore``, ``SupersessionStore``, ``ConversationStore``, ``JobQueue``,
``Maintenance``) and the value types beside them; ``backends.open_store`` opens the engine
that ``[storage] backend`` names.  What a caller may see is decided in ``visibility.py``; the
ranking model is ``ranking.py``'s.  Each engine lives in a package of its own (``sqlite/``).

The names are imported on first use (PEP 562), so that importing a small part of the store
(the start-up check, ``server/head_start.py``) does not import the whole of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.lazy import exports_on_first_use

if TYPE_CHECKING:
    from memoryd.store.conversation_records import (
        ExtractionJob,
        Learned,
        MessagesRead,
        SessionContext,
        SessionRef,
        StoredMessage,
    )
    from memoryd.store.interfaces import (
        Backend,
        ConversationStore,
        JobQueue,
        Maintenance,
        MemoryStore,
        PeopleStore,
        SupersessionStore,
    )
    from memoryd.store.people_records import AliasTaken, Forgotten, PeopleFocus, StoredPerson, SummaryMaterial
    from memoryd.store.query_vector import QueryVector
    from memoryd.store.records import EmbedJob, MemoryRecord, NewMemory, Provenance, SearchHit
    from memoryd.store.visibility import Scope

_EXPORTS = {
    "memoryd.store.conversation_records": (
        "ExtractionJob",
        "Learned",
        "MessagesRead",
        "SessionContext",
        "SessionRef",
        "StoredMessage",
    ),
    "memoryd.store.interfaces": (
        "Backend",
        "ConversationStore",
        "JobQueue",
        "Maintenance",
        "MemoryStore",
        "PeopleStore",
        "SupersessionStore",
    ),
    "memoryd.store.people_records": ("AliasTaken", "Forgotten", "PeopleFocus", "StoredPerson", "SummaryMaterial"),
    "memoryd.store.query_vector": ("QueryVector",),
    "memoryd.store.records": ("EmbedJob", "MemoryRecord", "NewMemory", "Provenance", "SearchHit"),
    "memoryd.store.visibility": ("Scope",),
}

__getattr__ = exports_on_first_use(__name__, _EXPORTS)

__all__ = [
    "AliasTaken",
    "Backend",
    "ConversationStore",
    "EmbedJob",
    "ExtractionJob",
    "Forgotten",
    "JobQueue",
    "Learned",
    "Maintenance",
    "MemoryRecord",
    "MemoryStore",
    "MessagesRead",
    "NewMemory",
    "PeopleFocus",
    "PeopleStore",
    "Provenance",
    "QueryVector",
    "Scope",
    "SearchHit",
    "SessionContext",
    "SessionRef",
    "StoredMessage",
    "StoredPerson",
    "SummaryMaterial",
    "SupersessionStore",
]
