"""The memory.* methods: validate beyond types, resolve the caller's scope, call the store.

The read methods are in ``memory_reads.py``, the write methods in ``memory_writes.py``, what
both work with in ``memory_base.py``.
"""

from __future__ import annotations

from memoryd.service.memory_base import AddedListener, DeletedListener
from memoryd.service.memory_reads import MAX_SEARCH_DEPTH, TYPE_FILTER_DEPTH, MemoryReads
from memoryd.service.memory_writes import MemoryWrites

__all__ = ["MAX_SEARCH_DEPTH", "TYPE_FILTER_DEPTH", "AddedListener", "DeletedListener", "MemoryService"]


class MemoryService(MemoryReads, MemoryWrites):
    """The memory.* methods of one daemon (``methods.py`` registers them)."""
