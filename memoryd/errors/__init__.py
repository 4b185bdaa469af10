"""memoryd's one error hierarchy.

Two kinds: ``RpcError`` classes are what a JSON-RPC caller receives, one per code of
``memoryd_client.errors.ErrorCode`` (the one table of codes, shared with the client); every
other class is raised by the layer that failed (store, embedder, LLM, config) and knows nothing of
JSON-RPC.  ``memoryd/rpc/errormap.py`` is the one place either kind becomes a reply: an
``RpcError`` as itself, every other class as its entry there says (a test fails for a class
without one), anything else as -32603 with a log line.

The classes live in modules by family (``base``, ``rpc``, ``startup``, ``store``, ``backends``);
import them from here: ``from memoryd.errors import StoreBusy``.

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
    │   ├── BrokenInvariant      the store was handed a value it must never hold (a bug above it)
    │   ├── ExtractionJobGone    an extraction job was erased or taken over while the LLM answered
    │   └── ExtractedMessagesGone  memory.extract's messages were erased while the LLM answered
    ├── EmbedderError            an embedding backend is down, slow or returned garbage
    └── LlmError                 the LLM backend failed; ``retry_later`` says what a job does next
        ├── LlmUnavailable          down, too slow, 429/5xx after the retries (retry later)
        ├── LlmRefused              a 4xx: bad key, unknown model, request too large (park)
        └── LlmBadReply             replies never decoded into the expected shape (park)
"""

from __future__ import annotations

from memoryd.errors.backends import (
    EmbedderError,
    LlmBadReply,
    LlmError,
    LlmRefused,
    LlmUnavailable,
)
from memoryd.errors.base import (
    MemorydError,
    lone_leaf,
)
from memoryd.errors.rpc import (
    RPC_ERRORS_BY_CODE,
    DeadlineExceeded,
    InternalError,
    InvalidParams,
    InvalidRequest,
    LlmNotConfigured,
    MethodNotFound,
    NotFound,
    Overloaded,
    ParseError,
    PayloadTooLarge,
    RpcError,
    ShuttingDown,
    StorageFull,
    Unauthorized,
    Unavailable,
)
from memoryd.errors.startup import (
    ConfigError,
    StartupError,
    StorageUnusable,
    StoreRefused,
    UnsupportedSqliteVec,
)
from memoryd.errors.store import (
    AmbiguousIdPrefix,
    BrokenInvariant,
    DiskFull,
    EmbeddingModelMismatch,
    ExtractedMessagesGone,
    ExtractionJobGone,
    PeopleLimitReached,
    StoreBusy,
    StoreConflict,
    StoreCorrupt,
    StoreError,
    StoreUnreachable,
    SupersedeRefused,
    UnknownListCursor,
)
from memoryd_client.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "AmbiguousIdPrefix",
    "BrokenInvariant",
    "ExtractedMessagesGone",
    "ExtractionJobGone",
    "ConfigError",
    "DeadlineExceeded",
    "DiskFull",
    "EmbedderError",
    "EmbeddingModelMismatch",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "LlmBadReply",
    "LlmError",
    "LlmNotConfigured",
    "LlmRefused",
    "LlmUnavailable",
    "MemorydError",
    "MethodNotFound",
    "NotFound",
    "Overloaded",
    "ParseError",
    "PayloadTooLarge",
    "PeopleLimitReached",
    "RPC_ERRORS_BY_CODE",
    "RpcError",
    "ShuttingDown",
    "StartupError",
    "StorageFull",
    "StorageUnusable",
    "StoreBusy",
    "StoreConflict",
    "StoreCorrupt",
    "StoreError",
    "StoreRefused",
    "StoreUnreachable",
    "SupersedeRefused",
    "Unauthorized",
    "Unavailable",
    "UnknownListCursor",
    "UnsupportedSqliteVec",
    "lone_leaf",
]
