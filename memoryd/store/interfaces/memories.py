"""``MemoryStore``: the memory.* methods' and system.health's view of the store."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from memoryd.store.people_records import PeopleFocus
from memoryd.store.query_vector import QueryVector
from memoryd.store.records import MemoryRecord, NewMemory, SearchHit
from memoryd.store.storage_state import Condition
from memoryd.store.visibility import Scope


class MemoryStore(Protocol):
    """Memories as callers see them: always inside the caller's ``Scope`` (``visibility.py``
    says what that scope may see), never anything else."""

    async def add(self, new: NewMemory) -> tuple[MemoryRecord, bool]:
        """Store ``new``; an identical live memory in the same scope is refreshed and returned
        instead (second value True)."""
        ...

    def add_many(self, news: Iterable[NewMemory]) -> int:
        """Bulk load without dedupe (benchmarks, tests); synchronous, not for the event loop."""
        ...

    async def list(
        self,
        scope: Scope,
        *,
        limit: int,
        offset: int = 0,
        before_id: str | None = None,
        include_expired: bool = False,
        about: Sequence[int] | None = None,
    ) -> builtins.list[MemoryRecord]:
        """Newest first; ``offset`` or ``before_id`` (an id or unique prefix: the page after it)
        pages; ``about`` keeps the memories about these people (``StoredPerson.rowid``: the
        backend's own key of a person, never shown on the wire)."""
        ...

    async def search(
        self,
        scope: Scope,
        query: str,
        *,
        limit: int,
        vector: QueryVector | None = None,
        people_focus: PeopleFocus | None = None,
        min_relevance: float = 0.0,
    ) -> builtins.list[SearchHit]:
        """Hybrid keyword + vector search within ``scope``, best first.  ``vector`` is awaited
        when the search needs it; None, or a vector of the wrong space, ranks by keywords.
        Each hit carries ``relevance`` (store/relevance.py, computed from the ranking features
        the same way by every backend); hits below ``min_relevance`` are left out."""
        ...

    async def get(self, scope: Scope, prefix: str) -> MemoryRecord | None:
        """A visible memory by full id or unique prefix; None when none; AmbiguousIdPrefix when
        the prefix names several."""
        ...

    async def delete(self, scope: Scope, prefix: str) -> str | None:
        """Delete a visible memory by full id or unique prefix; its id, or None."""
        ...

    async def short_ids(self, scope: Scope, ids: Iterable[str]) -> dict[str, str]:
        """The shortest prefix (at least 8 characters) naming each id among what ``scope`` sees."""
        ...

    @property
    def storage(self) -> Condition:
        """Whether the store takes writes, and why not."""
        ...

    @property
    def write_count(self) -> int:
        """Write transactions this process ran: a cheap change stamp."""
        ...

    async def health_counts(self) -> dict[str, Any]:
        """Active, expired and deleted memories, users, and the store's size (``db_bytes``)."""
        ...
