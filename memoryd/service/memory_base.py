"""What every memory.* method works with: the store, the embedder and backfill, the caller
checks, the listeners told about changes; and the answers about an id the caller gave."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator

from memoryd.auth import Authenticator
from memoryd.embed import Embedder
from memoryd.errors import AmbiguousIdPrefix, InvalidParams, NotFound
from memoryd.service.backfill import EmbeddingBackfill
from memoryd.service.params import DEFAULT_MAX_SUBJECTS
from memoryd.service.people import PeopleService
from memoryd.service.query_vectors import QueryVectors
from memoryd.service.secret_guard import SecretsGuard
from memoryd.service.supersession import Supersession
from memoryd.store import MemoryRecord, MemoryStore, Scope
from memoryd.store.supersession_records import NOT_VISIBLE

#: Told about every stored memory (people learning, summary freshness): the caller, the record,
#: and the names its owner goes by (``owner_names``).
AddedListener = Callable[[Scope, MemoryRecord, tuple[str, ...]], Awaitable[None]]
#: Told that memories the caller sees were deleted (summary freshness).
DeletedListener = Callable[[Scope], None]


class MemoryServiceBase:
    """The parts the read and the write methods share (``MemoryService`` joins them)."""

    def __init__(
        self,
        memories: MemoryStore,
        embedder: Embedder | None,
        backfill: EmbeddingBackfill | None,
        *,
        add_wait: float,
        query_timeout: float,
        authenticator: Authenticator | None = None,
        people: PeopleService | None = None,
        supersession: Supersession | None = None,
        secrets: SecretsGuard | None = None,
        max_subjects: int = DEFAULT_MAX_SUBJECTS,
    ) -> None:
        self.max_subjects = max_subjects
        self.authenticator = authenticator or Authenticator("trust")
        self.secrets = secrets or SecretsGuard("refuse")
        self.people = people
        self.supersession = supersession
        #: Told after each add (memory.add learns people itself, in the add's transaction).
        self.on_added: list[AddedListener] = []
        self.on_deleted: list[DeletedListener] = []
        #: Told the id of a user whose data was erased (caches holding their data drop it).
        self.on_erased: list[Callable[[str], None]] = []
        #: Called after an erasure that deleted group memories (``include_group``).
        self.on_group_erased: list[Callable[[], None]] = []
        self.memories = memories
        self.embedder = embedder
        self._query_vectors = None if embedder is None else QueryVectors(embedder, query_timeout)
        self.backfill = backfill
        self.add_wait = add_wait

    @property
    def _vector_space_ready(self) -> bool:
        return self.backfill is not None and self.backfill.vector_space_ready


@contextlib.contextmanager
def ambiguity_names(field: str) -> Iterator[None]:
    """An id prefix that matched several memories is the caller's input problem: -32602."""
    try:
        yield
    except AmbiguousIdPrefix as exc:
        raise InvalidParams.for_field(field, str(exc)) from None


def not_visible(field: str) -> NotFound:
    """Nothing the caller can see has that id: the same answer whether it exists elsewhere or not."""
    return NotFound("No memory visible to you matches that id", {"field": field, "reason": NOT_VISIBLE})
