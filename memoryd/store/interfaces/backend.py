"""``Backend``: one open store, its parts, its vector space, and its condition."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, Self

from memoryd.store.interfaces.conversations import ConversationStore
from memoryd.store.interfaces.jobs import JobQueue
from memoryd.store.interfaces.maintenance import Maintenance
from memoryd.store.interfaces.memories import MemoryStore
from memoryd.store.interfaces.people import PeopleStore
from memoryd.store.interfaces.supersession import SupersessionStore
from memoryd.store.storage_state import Condition


class VectorSpaceInfo(Protocol):
    """The embedding model whose vectors the store holds, their length, and the generation
    (a reindex to another model starts a new one)."""

    @property
    def model(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def generation(self) -> int: ...


class Backend(Protocol):
    @property
    def memories(self) -> MemoryStore: ...

    @property
    def people(self) -> PeopleStore: ...

    @property
    def supersession(self) -> SupersessionStore: ...

    @property
    def conversations(self) -> ConversationStore: ...

    @property
    def jobs(self) -> JobQueue: ...

    @property
    def maintenance(self) -> Maintenance: ...

    @property
    def condition(self) -> Condition:
        """Whether the store takes writes (ok, disk full, damaged), and why not."""
        ...

    def configure_vector_space(self, model: str, dim: int) -> None:
        """Record (first time), accept (same) or refuse (EmbeddingModelMismatch) the embedder's
        space; a requested reindex to exactly this model starts a new generation."""
        ...

    def request_reindex(self, model: str, dim: int | None = None) -> None: ...

    def check_vector_model(self, model: str) -> None:
        """Refuse (EmbeddingModelMismatch) an embedder of another model than the store's vectors
        unless a reindex to it was requested: start-up's check while the dimension is unknown."""
        ...

    def vector_space(self) -> VectorSpaceInfo | None: ...

    def stopping(self) -> None:
        """The daemon is stopping: a backend whose server cannot be reached lets the calls waiting
        for it (a client's, a worker's) fail at once instead of waiting out their timeout
        (blocking: run in a thread)."""
        ...

    def close(self) -> None:
        """Write what is pending, then release everything (idempotent)."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class StartupCheck(Protocol):
    """A check of the stored data that may start before the store opens and finish after it
    (SQLite: quick_check of the file).  The daemon serves once it passed, or once its wait ran
    out (damage found later stops writes through ``on_damage``)."""

    @property
    def finished(self) -> bool: ...

    @property
    def problems(self) -> str: ...

    def store_opened(self, on_damage: Callable[[str], None]) -> None: ...

    async def wait(self, seconds_after_start: float) -> None: ...

    def damage_found_within(self, seconds: float) -> bool: ...

    def join(self) -> None: ...

    def stop(self) -> None: ...
