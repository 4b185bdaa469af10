"""What the service layer may ask of a store, whatever engine holds it (``typing.Protocol``s).

``memoryd/store/sqlite/`` implements them today; another engine implements the same classes
and passes ``tests/contract/`` unchanged.  Nothing here names an engine's handles: no
connection, no rowid, no worker thread, no single writer.  A backend chosen by
``store.backends.open_store`` is a :class:`Backend`; its parts are the other protocols.
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
