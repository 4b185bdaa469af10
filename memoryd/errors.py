"""memoryd's one error hierarchy.

Two kinds: ``RpcError`` classes are what a JSON-RPC caller receives, one per code of
``memoryd_client.errors.ErrorCode`` (the one table of codes, shared with the client); every
other class is raised by the layer that failed (store, embedder, LLM, config) and knows nothing of
JSON-RPC.  ``memoryd/rpc/errormap.py`` is the one place either kind becomes a reply: an
``RpcError`` as itself, every other class as its entry there says (a test fails for a class
without one), anything else as -32603 with a log line.

    MemorydError
    ├── RpcError                 an error a JSON-RPC caller receives
    │   ├── ParseError           not JSON, or not UTF-8
    │   ├── InvalidRequest       not a JSON-RPC 2.0 request object
    │   ├── MethodNotFound
    │   ├── InvalidParams        data = {"field": ..., "reason": ...}
    │   ├── InternalError        a bug or an unexpected failure (always logged)
    │   ├── NotFound
    │   ├── Unauthorized
    │   ├── Overloaded           too many connections or requests; retry later
    │   ├── PayloadTooLarge      message over max_message_bytes; connection closed
    │   ├── DeadlineExceeded     the request ran past request_timeout
    │   ├── ShuttingDown         the daemon is stopping; retry after restart
    │   ├── Unavailable          a resource the call needs is busy or missing; retry
    │   ├── LlmNotConfigured     extraction is off: [llm] provider/url/model are not set
    │   └── StorageFull          the disk is full: nothing was written; retry when space returns
    ├── ConfigError              bad configuration: start-up stops, naming the key
    ├── StartupError             e.g. a live daemon already holds the socket (exit status 1)
    │   ├── StorageUnusable      the data dir or database cannot be created, opened or written (3)
    │   ├── StoreRefused         the database is damaged or suspiciously empty: not served (4)
    │   └── UnsupportedSqliteVec the installed sqlite-vec is outside the supported versions (5)
    ├── StoreError               the database refused something
    │   ├── StoreBusy            the database stayed locked past busy_timeout (callers: Unavailable)
    │   ├── StoreUnreachable     the database server is down or unreachable (callers: Unavailable)
    │   ├── StoreConflict        concurrent transactions kept deadlocking (callers: Unavailable)
    │   ├── DiskFull             SQLITE_FULL: nothing was written (callers: StorageFull)
    │   ├── StoreCorrupt         SQLite found the file damaged; writes stop (callers: Unavailable)
    │   ├── EmbeddingModelMismatch  the store was built with another model (run `memoryd reindex`)
    │   ├── AmbiguousIdPrefix    an id prefix matches several of the caller's memories
    │   ├── UnknownListCursor    memory.list's before_id names none of the caller's memories
    │   ├── SupersedeRefused     memory.add's ``supersedes`` names no visible memory, or one it may not replace
    │   ├── PeopleLimitReached   a subject would create a person past limits.max_people_per_owner
    │   └── BrokenInvariant      the store was handed a value it must never hold (a bug above it)
    ├── EmbedderError            an embedding backend is down, slow or returned garbage
    └── LlmError                 the LLM backend failed; ``retry_later`` says what a job does next
        ├── LlmUnavailable          down, too slow, 429/5xx after the retries (retry later)
        ├── LlmRefused              a 4xx: bad key, unknown model, request too large (park)
        └── LlmBadReply             replies never decoded into the expected shape (park)
"""

from __future__ import annotations

from typing import Any, ClassVar

from memoryd_client.errors import ErrorCode


def lone_leaf(exc: BaseException) -> BaseException:
    """The exception ``exc`` stands for when it is a tree of exception groups (what a nursery makes
    of its body's errors) whose leaves are all of one class: the first leaf (two readers of one
    search that both found the file damaged are one damaged file); else ``exc`` itself."""
    if not isinstance(exc, BaseExceptionGroup):  # every plain error reply passes here
        return exc
    leaves: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending:
        item = pending.pop()
        if isinstance(item, BaseExceptionGroup):
            pending.extend(reversed(item.exceptions))
        elif leaves and type(item) is not type(leaves[0]):
            return exc
        else:
            leaves.append(item)
    return leaves[0] if leaves else exc


class MemorydError(Exception):
    """Base of every error memoryd raises on purpose."""


class RpcError(MemorydError):
    """An error that reaches a JSON-RPC caller as ``{"code", "message", "data"}``.

    Each subclass names its ``ErrorCode`` and the message sent when none is given.
    """

    code: ClassVar[int] = ErrorCode.INTERNAL_ERROR
    default_message: ClassVar[str] = "Internal error"

    def __init_subclass__(cls, code: ErrorCode | None = None, message: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code
        if message is not None:
            cls.default_message = message

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)


class ParseError(RpcError, code=ErrorCode.PARSE_ERROR, message="Parse error"): ...


class InvalidRequest(RpcError, code=ErrorCode.INVALID_REQUEST, message="Invalid Request"): ...


class MethodNotFound(RpcError, code=ErrorCode.METHOD_NOT_FOUND, message="Method not found"): ...


class InvalidParams(RpcError, code=ErrorCode.INVALID_PARAMS, message="Invalid params"):
    @classmethod
    def for_field(cls, field: str, reason: str) -> InvalidParams:
        """The usual shape: the message and ``data`` both name the bad field."""
        return cls(f"Invalid params: {field}: {reason}", {"field": field, "reason": reason})


class InternalError(RpcError, code=ErrorCode.INTERNAL_ERROR, message="Internal error"): ...


class NotFound(RpcError, code=ErrorCode.NOT_FOUND, message="Not found"): ...


class Unauthorized(RpcError, code=ErrorCode.UNAUTHORIZED, message="Unauthorized"): ...


class Overloaded(RpcError, code=ErrorCode.OVERLOADED, message="Overloaded, retry later"): ...


class PayloadTooLarge(RpcError, code=ErrorCode.PAYLOAD_TOO_LARGE, message="Payload too large"): ...


class DeadlineExceeded(RpcError, code=ErrorCode.DEADLINE_EXCEEDED, message="Request deadline exceeded"): ...


class ShuttingDown(RpcError, code=ErrorCode.SHUTTING_DOWN, message="Daemon is shutting down, retry after restart"): ...


class Unavailable(RpcError, code=ErrorCode.UNAVAILABLE, message="Temporarily unavailable, retry later"): ...


class LlmNotConfigured(
    RpcError,
    code=ErrorCode.LLM_NOT_CONFIGURED,
    message='Extraction is off: set [llm] provider ("openai" or "ollama"), url and model',
):
    """An extract method was called while ``[llm] provider = "none"`` (the default)."""


class StorageFull(RpcError, code=ErrorCode.STORAGE_FULL, message="Storage full: nothing was written, retry later"):
    """The daemon's disk is full (``DiskFull`` below the service); it recovers by itself."""


#: The class for each code (the classes carry their codes).
RPC_ERRORS_BY_CODE: dict[int, type[RpcError]] = {cls.code: cls for cls in RpcError.__subclasses__()}


class ConfigError(MemorydError):
    """The configuration is wrong; the message names the key and what was wrong."""


class StartupError(MemorydError):
    """The daemon cannot start (socket held by a live daemon, unwritable data dir, ...).

    ``exit_status`` is what `memoryd serve` exits with (documented in the README), so a
    service manager can tell a failure that a restart may cure from one that needs a person.
    """

    exit_status: ClassVar[int] = 1


class StorageUnusable(StartupError):
    """The data directory or the database file cannot be created, opened or written: a
    read-only mount, missing permissions, a full disk.  The message names the path and the
    cause (the OS's own words)."""

    exit_status = 3

    def __init__(self, path: object, cause: str, errno: int | None = None) -> None:
        super().__init__(f"{path}: {cause}")
        self.path = path
        self.cause = cause
        #: The errno behind ``cause`` when one is known (sent to systemd as ERRNO=).
        self.errno = errno


class StoreRefused(StartupError):
    """The database is damaged (the start-up integrity check failed) or is an empty file
    where a store was expected: serving it could lose or hide memories."""

    exit_status = 4


class UnsupportedSqliteVec(StartupError):
    """The installed sqlite-vec is outside the versions this memoryd supports
    (``store/sqlite/vec_support.py``): a restart cannot mend it, installing a supported version can."""

    exit_status = 5


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


class EmbedderError(MemorydError):
    """An embedding backend failed: down, too slow, or returned something unusable."""


class LlmError(MemorydError):
    """An LLM backend failed.  The message names the server, never the key or the prompt."""

    #: True when the same request may well succeed later (the job is retried with backoff);
    #: False when it needs a person (the job is parked with the reason).
    retry_later: ClassVar[bool] = False


class LlmUnavailable(LlmError):
    """Connection refused or reset, no reply in time, or 429/5xx on every attempt."""

    retry_later = True

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        #: The server's last Retry-After hint in seconds (capped), for the job's next try.
        self.retry_after = retry_after


class LlmRefused(LlmError):
    """The server refused the request itself (401, 403, 404, a 400 in every output mode)."""


class LlmBadReply(LlmError):
    """Every attempt got a reply that was empty, not JSON, or not the requested shape."""
