"""What the service layer may ask of a store, whatever engine holds it (``typing.Protocol``s).

``memoryd/store/sqlite/`` implements them today; another engine implements the same classes
and passes ``tests/contract/`` unchanged.  Nothing here hands out an engine's handles (no
connection, no transaction) or assumes a worker thread or a single writer.  The integer keys
that cross them (a person's ``StoredPerson.rowid``, a job's ``memory_rowid``, a supersession
candidate's key) are the backend's own opaque keys: a caller only hands them back.  A backend
chosen by ``store.backends.open_store`` is a :class:`Backend`; its parts are the other protocols.
"""

from memoryd.store.interfaces.backend import Backend, StartupCheck, VectorSpaceInfo
from memoryd.store.interfaces.conversations import ConversationStore
from memoryd.store.interfaces.jobs import JobQueue
from memoryd.store.interfaces.maintenance import Maintenance, MaintenanceReport
from memoryd.store.interfaces.memories import MemoryStore
from memoryd.store.interfaces.people import PeopleStore
from memoryd.store.interfaces.supersession import SupersessionStore

__all__ = [
    "Backend",
    "ConversationStore",
    "JobQueue",
    "Maintenance",
    "MaintenanceReport",
    "MemoryStore",
    "PeopleStore",
    "StartupCheck",
    "SupersessionStore",
    "VectorSpaceInfo",
]
