"""The memory database: SQLite (apsw) with FTS5 and sqlite-vec, scoped per caller.

Everything a caller may see is decided in SQL inside each retriever; see ``search.py`` for the
ranking and ``vectors.py`` for vector spaces and generations.
"""

from memoryd.store.records import EmbedJob, MemoryRecord, NewMemory, Scope, SearchHit
from memoryd.store.store import Store
from memoryd.store.vectors import VectorSpace

__all__ = ["EmbedJob", "MemoryRecord", "NewMemory", "Scope", "SearchHit", "Store", "VectorSpace"]
