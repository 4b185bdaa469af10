"""Errors the store raises when the database refuses an operation (never JSON-RPC errors)."""

from __future__ import annotations

from memoryd.errors.base import MemorydError


class StoreError(MemorydError):
    """The database refused an operation."""


class StoreBusy(StoreError):
    """Another process (an admin command such as a large import) held the database's lock past
    ``storage.busy_timeout_ms``; nothing was written, the call can be retried."""

    def __init__(self, busy_timeout_ms: int) -> None:
        super().__init__(f"the database stayed locked for {busy_timeout_ms} ms")
        self.busy_timeout_ms = busy_timeout_ms


class StoreConflict(StoreError):
    """A database server (PostgreSQL) rolled the transaction back as a deadlock or a
    serialization failure on every try; nothing was written, the call can be retried."""

    def __init__(self, tries: int, detail: str) -> None:
        super().__init__(f"concurrent transactions conflicted on {tries} tries: {detail}")
        self.tries = tries


class DiskFull(StoreError):
    """SQLite answered SQLITE_FULL: the transaction was rolled back, nothing was written."""


class StoreCorrupt(StoreError):
    """SQLite found the database file damaged (SQLITE_CORRUPT / SQLITE_NOTADB).  The store
    stops writing (so it is not made worse) until an operator runs `memoryd check` and
    restores a backup."""


class StoreUnreachable(StoreError):
    """A database server (PostgreSQL) could not be reached or dropped the connection mid-call;
    the transaction was rolled back, nothing was written, and the call can be retried once the
    store reconnects by itself."""

    def __init__(self, backend: str, detail: str = "") -> None:
        super().__init__(f"the {backend} database is unreachable" + (f": {detail}" if detail else ""))
        self.backend = backend


class EmbeddingModelMismatch(StoreError):
    """The store's vectors come from another model; mixing vector spaces is refused."""

    @classmethod
    def between(cls, stored: str, stored_dim: int, model: str, dim: int | None = None) -> EmbeddingModelMismatch:
        """The refusal, naming both models and the way out (``dim`` None: not known yet)."""
        embedder = model if dim is None else f"{model} (dim {dim})"
        return cls(
            f"the store's vectors come from {stored} (dim {stored_dim}), but the embedder is "
            f"{embedder}; run `memoryd reindex` to re-embed every memory with the new model, "
            "or configure the old one again"
        )


class AmbiguousIdPrefix(StoreError):
    """An id prefix matches ``count`` (>= 2) memories the caller can see; the service turns it
    into InvalidParams naming the field that carried the prefix."""

    def __init__(self, prefix: str, count: int) -> None:
        super().__init__(f"prefix {prefix} is ambiguous: {count} of your memories match; give more characters")
        self.prefix = prefix
        self.count = count


class UnknownListCursor(StoreError):
    """``before_id`` names no memory the caller can see (ids no longer order by time, so a
    cursor must be a memory's id or prefix; a page's last memory stays one even once deleted)."""

    def __init__(self, prefix: str) -> None:
        super().__init__(f"no memory of yours has the id or prefix {prefix}; pass the id of a page's last memory")


class SupersedeRefused(StoreError):
    """The memory named by ``supersedes`` is not visible to the caller (``found`` False) or may
    not be replaced by the new one (another scope, already superseded); nothing was written."""

    def __init__(self, reason: str, *, found: bool, field: str = "supersedes") -> None:
        super().__init__(reason)
        self.reason = reason
        self.found = found
        self.field = field


class PeopleLimitReached(StoreError):
    """Storing the memory would give its owner more than ``limits.max_people_per_owner``
    people (a subject naming nobody known creates a person); nothing was written."""

    def __init__(self, field: str, limit: int) -> None:
        super().__init__(
            f"names a new person, and you already have {limit} people (limits.max_people_per_owner); "
            "use a known person's name or alias, or merge or delete people"
        )
        self.field = field
        self.limit = limit


class BrokenInvariant(StoreError):
    """A value breaks one of the store's invariants (a shared memory without a chat, a scope
    without a user).  Input is validated in ``memoryd.service`` first: reaching this is a bug."""


class ExtractionJobGone(StoreError):
    """An extraction job could not be completed because it is no longer this daemon's: its
    session was erased while the LLM answered (``memory.forget_all``), or, on a shared database,
    its lease ran out and another daemon claimed it.  Nothing it learned was stored; there is
    nothing to retry."""

    def __init__(self) -> None:
        super().__init__("the extraction job was erased or taken over since it was claimed")


class ExtractedMessagesGone(StoreError):
    """Facts extracted from stored messages (``memory.extract``) were not stored because those
    messages are gone: erased (``memory.forget_all``, ``memoryd forget-user``) or pruned while
    the LLM answered; or facts extracted from a request's messages
    (``memory.extract_from_messages``) were not stored because their user was erased while the
    LLM answered.  What was learned from them goes with them."""

    def __init__(self) -> None:
        super().__init__("the messages the facts were extracted from are gone")
