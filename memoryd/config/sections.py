"""The configuration's keys: one frozen msgspec Struct per TOML table, with defaults and bounds.

A key's comment here is its documentation (``memoryd config --defaults`` prints the keys).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from msgspec import Meta, Struct

from memoryd_client.paths import default_socket_path

EmbedderKind = Literal["local", "ollama", "openai", "none"]
LlmProvider = Literal["none", "openai", "ollama"]
StorageBackend = Literal["sqlite", "postgres"]
PositiveFloat = Annotated[float, Meta(gt=0)]
PositiveInt = Annotated[int, Meta(ge=1)]


class Section(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """A table of the file (and the top level): unknown keys are an error, values never change."""


class ModelServerConfig(Section, frozen=True):
    """A model behind an HTTP API (Ollama or OpenAI-compatible): the keys [embed] and [llm] share."""

    #: Base URL, e.g. http://127.0.0.1:11434 (Ollama) or http://127.0.0.1:8080.
    url: str = ""
    model: str = ""
    #: Sent as a Bearer token; Ollama ignores it, a proxy in front of it may want it.
    api_key: str = ""
    #: A file holding the key (keeps it out of the config and the environment).
    api_key_file: str = ""


class LimitsConfig(Section, frozen=True):
    """Every bound is listed with what a client sees under "Limits and failure modes" in README.md."""

    max_message_bytes: PositiveInt = 1024 * 1024
    max_connections: PositiveInt = 512
    #: Regular slots one peer uid may hold (uids in auth.trusted_uids are exempt).
    max_connections_per_uid: PositiveInt = 384
    #: Slots past max_connections kept for auth.trusted_uids.
    reserved_connections: Annotated[int, Meta(ge=0)] = 16
    #: Slots past max_connections for system.health probes (that method only).
    health_probe_connections: Annotated[int, Meta(ge=0)] = 8
    #: The listen backlog: connects a burst may queue before the daemon accepts them (the
    #: kernel caps it at /proc/sys/net/core/somaxconn).
    listen_backlog: PositiveInt = 1024
    #: Requests one connection may have in flight; past it the daemon stops reading (backpressure).
    max_inflight_per_connection: PositiveInt = 32
    #: Requests one peer uid may have in flight over all its connections; past it a request is
    #: answered -32003 with retry_after (auth.trusted_uids are exempt).
    max_inflight_per_uid: PositiveInt = 256
    #: Calls in one batch.
    max_batch_calls: PositiveInt = 1000
    #: Reply bytes one connection may hold unsent (a batch's whole reply included).
    max_reply_bytes: PositiveInt = 4 * 1024 * 1024
    #: Bytes buffered across all connections: unfinished frames plus replies not yet sent.
    max_buffered_bytes: PositiveInt = 16 * 1024 * 1024
    request_timeout: PositiveFloat = 30.0
    idle_timeout: PositiveFloat = 300.0
    #: Seconds a frame may take to arrive whole once its first byte is in.
    frame_timeout: PositiveFloat = 10.0
    shutdown_grace: PositiveFloat = 10.0
    #: Names in one memory's subjects (memory.add and `memoryd import`).
    max_subjects_per_memory: Annotated[int, Meta(ge=1, le=1000)] = 32
    #: People one user may have; a subject that would create one more is refused (-32602), and
    #: extraction and relationship statements stop creating people.  0 means unlimited.
    max_people_per_owner: Annotated[int, Meta(ge=0)] = 2000
    #: memory.observe, per user: messages and bytes of message text stored in any 60 seconds,
    #: distinct sessions observed into within an hour, and sessions waiting for extraction
    #: (with an LLM).  Past any of them a call is answered -32003 with retry_after.
    observe_messages_per_minute: PositiveInt = 600
    observe_bytes_per_minute: PositiveInt = 4 * 1024 * 1024
    max_observed_sessions_per_user: PositiveInt = 100
    max_queued_extractions_per_user: PositiveInt = 20


class EmbedConfig(ModelServerConfig, frozen=True):
    """The embedder; url, model and the key are read for embedder = "ollama" / "openai"."""

    #: local: a sentence-transformers folder; empty means the pinned bundled all-MiniLM-L6-v2.
    model_path: str = ""
    #: 0 means "learn it from the first reply".
    dim: Annotated[int, Meta(ge=0)] = 0
    timeout: PositiveFloat = 10.0
    retries: Annotated[int, Meta(ge=0, le=10)] = 3
    batch_size: Annotated[int, Meta(ge=1, le=2048)] = 64
    #: How long memory.add waits for its own embedding before answering (it never fails on it).
    add_wait: Annotated[float, Meta(ge=0)] = 2.0
    #: How long memory.search waits for the query embedding before going keyword-only.
    query_timeout: PositiveFloat = 3.0


class AuthConfig(Section, frozen=True):
    #: "trust": the caller's user_id/chat_id are believed; only for a socket nobody else can
    #: reach (mode 0600).  "token": every call needs a signed context_token (see "Running tools in a sandbox" in README.md).
    mode: Literal["trust", "token"] = "trust"
    #: The HMAC key, decoded like ash's ASH_CONTEXT_TOKEN_SECRET: hex, else base64url, else UTF-8.
    token_secret: str = ""
    #: A file holding the secret (preferred: keeps it out of the config and the environment).
    token_secret_file: str = ""
    #: Peer uids (SO_PEERCRED) that may call without a token in token mode: the host orchestrator.
    trusted_uids: list[Annotated[int, Meta(ge=0)]] = []


class StorageConfig(Section, frozen=True):
    #: The engine that holds the memories: "sqlite", one file under data_dir; or "postgres",
    #: one PostgreSQL database that several daemons (hosts) share (docs/postgres.md; needs
    #: `pip install 'memoryd[postgres]'`).  The service reaches it only through the interfaces
    #: in memoryd/store/interfaces.
    backend: StorageBackend = "sqlite"
    #: postgres: a libpq connection URL, e.g. postgresql://memoryd@db.internal/memoryd?sslmode=verify-full
    #: (every libpq option passes through).  Never logged with its password.
    url: str = ""
    #: postgres: a file holding the password (keeps it out of the config and the environment;
    #: PGPASSWORD and ~/.pgpass work too, as for any libpq client).
    password_file: str = ""
    #: postgres: connections this daemon keeps open (the calls it runs on the database at once).
    pool_size: Annotated[int, Meta(ge=1, le=256)] = 8
    #: postgres: milliseconds one statement may run before the server cancels it (0: no limit).
    statement_timeout_ms: Annotated[int, Meta(ge=0)] = 30000
    readers: Annotated[int, Meta(ge=1, le=64)] = 4
    busy_timeout_ms: Annotated[int, Meta(ge=0)] = 5000
    #: Seconds start-up waits for the integrity check (quick_check) before serving; a larger
    #: store is served meanwhile and the check finishes in the background (see README.md).
    integrity_check_wait: Annotated[float, Meta(ge=0)] = 0.5
    #: MiB of page cache the store may hold in this process, all connections together; 0 means
    #: no shared cap (each connection still keeps at most 16 MiB).
    cache_mib: Annotated[int, Meta(ge=0)] = 32


class LifecycleConfig(Section, frozen=True):
    """What the daemon's maintenance task does (see "Lifecycle inside the daemon" in README.md)."""

    #: Deleted or expired memories are hard-removed by gc this many days later.
    retention_days: Annotated[float, Meta(ge=0)] = 30.0
    #: Seconds between maintenance runs (expiry, gc, max_entries); one also runs at start-up.
    maintenance_interval: PositiveFloat = 3600.0
    #: Live personal memories per user / group memories per chat; 0 means unlimited.
    max_entries_per_user: Annotated[int, Meta(ge=0)] = 0
    max_entries_per_chat: Annotated[int, Meta(ge=0)] = 0
    #: Memories added in the last this-many days get +1 eviction strength (docs/lifecycle.md).
    protect_recent_days: Annotated[float, Meta(ge=0)] = 7.0


class EpisodesConfig(Section, frozen=True):
    """Observed messages kept as searchable memories of type ``episode`` (docs/lifecycle.md)."""

    #: Store one episode per message memory.observe receives.
    enabled: bool = True
    #: Episodes are removed this many days after they were observed (0 keeps them for good).
    #: They do not count towards max_entries.
    retention_days: Annotated[float, Meta(ge=0)] = 90.0


class LlmConfig(ModelServerConfig, frozen=True):
    """The model that turns conversations into memories (see "Extraction" in README.md)."""

    #: "none" turns extraction off; "openai": any /v1/chat/completions server; "ollama": /api/chat.
    provider: LlmProvider = "none"
    #: Seconds one request may take, whole reply included (local models can be slow).
    timeout: PositiveFloat = 120.0
    retries: Annotated[int, Meta(ge=0, le=10)] = 2
    #: Requests in flight to the server at once; the rest wait their turn.
    concurrency: Annotated[int, Meta(ge=1, le=64)] = 2
    temperature: Annotated[float, Meta(ge=0, le=2)] = 0.0
    #: Longest reply asked for, in tokens (OpenAI max_tokens, Ollama num_predict).
    max_tokens: Annotated[int, Meta(ge=64, le=65536)] = 2048


class ExtractionConfig(Section, frozen=True):
    """What extraction keeps and when it runs."""

    #: A session is extracted once it has been quiet this long.
    debounce_seconds: Annotated[float, Meta(ge=0)] = 30.0
    #: Facts the model is less sure of than this are dropped.
    confidence_threshold: Annotated[float, Meta(ge=0, le=1)] = 0.7
    #: A secret in an extracted fact or in memory.add: "refuse" keeps the text out, "redact"
    #: stores it with the secret replaced by [redacted].
    secrets: Literal["refuse", "redact"] = "refuse"
    #: Messages one extraction reads at most (the newest).
    max_messages: Annotated[int, Meta(ge=1, le=1000)] = 50
    #: memory.extract reads this many messages either side of the one named.
    context_messages: Annotated[int, Meta(ge=0, le=50)] = 2
    #: Observed messages are removed this many days after they arrive.
    retention_days: Annotated[float, Meta(ge=0)] = 30.0
    #: An extraction job that failed this many times is parked with its reason.
    max_attempts: Annotated[int, Meta(ge=1, le=100)] = 5


class SupersessionConfig(Section, frozen=True):
    """When a new memory replaces older ones (see "Supersession" in README.md)."""

    #: "rules": the offline rules, inline in memory.add; "llm": the [llm] model, in the
    #: background after the add is acknowledged; "auto": llm when [llm] provider is set.
    decider: Literal["auto", "rules", "llm"] = "auto"
    #: Cosine an older memory needs with the new one to be a candidate by meaning (with an
    #: embedder; the rules also look at memories that set the same attribute).
    similarity: Annotated[float, Meta(ge=0, le=1)] = 0.75
    #: Older memories judged per new one, newest first.
    max_candidates: Annotated[int, Meta(ge=1, le=50)] = 5


class SummaryConfig(Section, frozen=True):
    """memory.summary and memory.context (see "People, context and summary" in README.md)."""

    #: With an LLM, a summary is rebuilt this long after the first new fact (adds in a row cost
    #: one call); offline the digest is rebuilt on the next call and never stale.
    debounce_seconds: Annotated[float, Meta(ge=0)] = 30.0
    #: The newest memories a summary is built from.
    max_memories: Annotated[int, Meta(ge=1, le=5000)] = 200
    #: The longest summary kept.
    max_chars: Annotated[int, Meta(ge=100, le=100_000)] = 1500


class ContextConfig(Section, frozen=True):
    """memory.context (see docs/relevance.md)."""

    #: No memory is injected unless the best one's relevance (the estimated probability that a
    #: memory helps answer the message, memoryd/store/relevance.py) reaches this; then those
    #: reaching relevance.CONTEXT_SHARE of the best are.  A call's own ``min_relevance`` overrides
    #: it.  The default was chosen held out by bench/fit_relevance.py.
    min_relevance: Annotated[float, Meta(ge=0, le=1)] = 0.25
    #: Whether the owner's summary goes into the answer (``summary``) and its block.  Without an
    #: LLM the summary is a digest of the newest facts, whatever the message is about: an
    #: assistant that wants only what the message calls for turns it off (a call may say otherwise).
    include_summary: bool = True


class Config(Section, frozen=True):
    socket: str = ""
    #: Octal string: who may connect is decided by the socket file's mode and group.
    socket_mode: str = "0600"
    socket_group: str = ""
    data_dir: str = ""
    embedder: EmbedderKind = "local"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["kv", "json"] = "kv"
    limits: LimitsConfig = LimitsConfig()
    embed: EmbedConfig = EmbedConfig()
    storage: StorageConfig = StorageConfig()
    lifecycle: LifecycleConfig = LifecycleConfig()
    episodes: EpisodesConfig = EpisodesConfig()
    auth: AuthConfig = AuthConfig()
    llm: LlmConfig = LlmConfig()
    extraction: ExtractionConfig = ExtractionConfig()
    supersession: SupersessionConfig = SupersessionConfig()
    summary: SummaryConfig = SummaryConfig()
    context: ContextConfig = ContextConfig()

    @property
    def socket_path(self) -> Path:
        return Path(self.socket or default_socket_path())

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir or default_data_dir())

    @property
    def db_path(self) -> Path:
        return self.data_path / "memoryd.db"

    @property
    def socket_mode_bits(self) -> int:
        return int(self.socket_mode, 8)


def default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "memoryd")
