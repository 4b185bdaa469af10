"""Configuration: msgspec Structs, layered as flags > env (MEMORYD_<NAME>) > TOML file > defaults.

Every key of the file can also come from the environment: top-level keys as ``MEMORYD_<KEY>``,
keys of a table as ``MEMORYD_<TABLE>_<KEY>`` (``MEMORYD_LIMITS_IDLE_TIMEOUT=60``).  An unknown
key or a wrong type in the file or the environment stops start-up with a message naming it.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, get_origin

import msgspec
from msgspec import Meta, Struct

from memoryd.errors import ConfigError
from memoryd_client.paths import default_socket_path

EmbedderKind = Literal["local", "ollama", "openai", "none"]
LlmProvider = Literal["none", "openai", "ollama"]
PositiveFloat = Annotated[float, Meta(gt=0)]
PositiveInt = Annotated[int, Meta(ge=1)]

ENV_PREFIX = "MEMORYD_"
#: MEMORYD_* variables that are not config keys: the config path itself, and the client's own.
_ENV_NOT_KEYS = {"MEMORYD_CONFIG"}


class _Section(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    pass


class LimitsConfig(_Section, frozen=True):
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


class EmbedConfig(_Section, frozen=True):
    #: local: a sentence-transformers folder; empty means the pinned bundled all-MiniLM-L6-v2.
    model_path: str = ""
    #: ollama/openai: base URL, e.g. http://127.0.0.1:11434 or http://127.0.0.1:8080.
    url: str = ""
    model: str = ""
    api_key: str = ""
    api_key_file: str = ""
    #: 0 means "learn it from the first reply".
    dim: Annotated[int, Meta(ge=0)] = 0
    timeout: PositiveFloat = 10.0
    retries: Annotated[int, Meta(ge=0, le=10)] = 3
    batch_size: Annotated[int, Meta(ge=1, le=2048)] = 64
    #: How long memory.add waits for its own embedding before answering (it never fails on it).
    add_wait: Annotated[float, Meta(ge=0)] = 2.0
    #: How long memory.search waits for the query embedding before going keyword-only.
    query_timeout: PositiveFloat = 3.0


class AuthConfig(_Section, frozen=True):
    #: "trust": the caller's user_id/chat_id are believed; only for a socket nobody else can
    #: reach (mode 0600).  "token": every call needs a signed context_token (see "Running tools in a sandbox" in README.md).
    mode: Literal["trust", "token"] = "trust"
    #: The HMAC key, decoded like ash's ASH_CONTEXT_TOKEN_SECRET: hex, else base64url, else UTF-8.
    token_secret: str = ""
    #: A file holding the secret (preferred: keeps it out of the config and the environment).
    token_secret_file: str = ""
    #: Peer uids (SO_PEERCRED) that may call without a token in token mode: the host orchestrator.
    trusted_uids: list[Annotated[int, Meta(ge=0)]] = []


class StorageConfig(_Section, frozen=True):
    readers: Annotated[int, Meta(ge=1, le=64)] = 4
    busy_timeout_ms: Annotated[int, Meta(ge=0)] = 5000
    #: Seconds start-up waits for the integrity check (quick_check) before serving; a larger
    #: store is served meanwhile and the check finishes in the background (see README.md).
    integrity_check_wait: Annotated[float, Meta(ge=0)] = 0.5


class LifecycleConfig(_Section, frozen=True):
    """What the daemon's maintenance task does (see "Lifecycle inside the daemon" in README.md)."""

    #: Deleted or expired memories are hard-removed by gc this many days later.
    retention_days: Annotated[float, Meta(ge=0)] = 30.0
    #: Seconds between maintenance runs (expiry, gc, max_entries); one also runs at start-up.
    maintenance_interval: PositiveFloat = 3600.0
    #: Live personal memories per user / group memories per chat; 0 means unlimited.
    max_entries_per_user: Annotated[int, Meta(ge=0)] = 0
    max_entries_per_chat: Annotated[int, Meta(ge=0)] = 0
    #: Eviction spares memories added in the last this-many days unless nothing else is left.
    protect_recent_days: Annotated[float, Meta(ge=0)] = 7.0


class LlmConfig(_Section, frozen=True):
    """The model that turns conversations into memories (see "Extraction" in README.md)."""

    #: "none" turns extraction off; "openai": any /v1/chat/completions server; "ollama": /api/chat.
    provider: LlmProvider = "none"
    url: str = ""
    model: str = ""
    api_key: str = ""
    api_key_file: str = ""
    #: Seconds one request may take, whole reply included (local models can be slow).
    timeout: PositiveFloat = 120.0
    retries: Annotated[int, Meta(ge=0, le=10)] = 2
    #: Requests in flight to the server at once; the rest wait their turn.
    concurrency: Annotated[int, Meta(ge=1, le=64)] = 2
    temperature: Annotated[float, Meta(ge=0, le=2)] = 0.0
    #: Longest reply asked for, in tokens (OpenAI max_tokens, Ollama num_predict).
    max_tokens: Annotated[int, Meta(ge=64, le=65536)] = 2048


class ExtractionConfig(_Section, frozen=True):
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


class SupersessionConfig(_Section, frozen=True):
    """When a new memory replaces older ones (see "Supersession" in README.md)."""

    #: "rules": the offline rules, inline in memory.add; "llm": the [llm] model, in the
    #: background after the add is acknowledged; "auto": llm when [llm] provider is set.
    decider: Literal["auto", "rules", "llm"] = "auto"
    #: Cosine an older memory needs with the new one to be a candidate by meaning (with an
    #: embedder; the rules also look at memories that set the same attribute).
    similarity: Annotated[float, Meta(ge=0, le=1)] = 0.75
    #: Older memories judged per new one, newest first.
    max_candidates: Annotated[int, Meta(ge=1, le=50)] = 5


class SummaryConfig(_Section, frozen=True):
    """memory.summary and memory.context (see "People, context and summary" in README.md)."""

    #: With an LLM, a summary is rebuilt this long after the first new fact (adds in a row cost
    #: one call); offline the digest is rebuilt on the next call and never stale.
    debounce_seconds: Annotated[float, Meta(ge=0)] = 30.0
    #: The newest memories a summary is built from.
    max_memories: Annotated[int, Meta(ge=1, le=5000)] = 200
    #: The longest summary kept.
    max_chars: Annotated[int, Meta(ge=100, le=100_000)] = 1500


class Config(_Section, frozen=True):
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
    auth: AuthConfig = AuthConfig()
    llm: LlmConfig = LlmConfig()
    extraction: ExtractionConfig = ExtractionConfig()
    supersession: SupersessionConfig = SupersessionConfig()
    summary: SummaryConfig = SummaryConfig()

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


def _sections() -> dict[str, type[_Section]]:
    return {
        field.name: field.type
        for field in msgspec.structs.fields(Config)
        if isinstance(field.type, type) and issubclass(field.type, _Section)
    }


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """MEMORYD_* variables as a nested dict of raw strings, keyed like the TOML file."""
    sections = _sections()
    top_keys = {f.name for f in msgspec.structs.fields(Config)} - set(sections)
    overrides: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name in _ENV_NOT_KEYS:
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key in top_keys:
            overrides[key] = value
            continue
        for section, section_type in sections.items():
            sub_key = key.removeprefix(section + "_")
            field_types = {f.name: f.type for f in msgspec.structs.fields(section_type)}
            if sub_key != key and sub_key in field_types:
                # A list key takes a comma-separated value: MEMORYD_AUTH_TRUSTED_UIDS="0,1000".
                is_list = get_origin(field_types[sub_key]) is list
                overrides.setdefault(section, {})[sub_key] = _split_list(value) if is_list else value
                break
        # Other MEMORYD_* names are ignored: sandboxes set the client's variables too.
    return overrides


def _split_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _convert(raw: dict[str, Any], *, strict: bool, origin: str) -> Config:
    try:
        config = msgspec.convert(raw, Config, strict=strict)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration ({origin}): {_describe(exc)}") from None
    try:
        _ = config.socket_mode_bits  # parses the octal string
    except ValueError:
        raise ConfigError(f"invalid configuration ({origin}): socket_mode must be an octal string like \"0600\"") from None
    return config


def _check_auth(auth: AuthConfig) -> None:
    # Checked on the merged result only: the secret often comes from another layer than the
    # mode (mode in the file, MEMORYD_AUTH_TOKEN_SECRET from a credentials store).
    if auth.token_secret and auth.token_secret_file:
        raise ConfigError("invalid configuration: set auth.token_secret or auth.token_secret_file, not both")
    if auth.mode == "token" and not (auth.token_secret or auth.token_secret_file):
        raise ConfigError(
            'invalid configuration: auth.mode "token" needs auth.token_secret or auth.token_secret_file'
        )


def _describe(exc: msgspec.ValidationError) -> str:
    # msgspec says "Expected `int`, got `str` - at `$.limits.idle_timeout`"; name the key plainly.
    message = str(exc)
    reason, _, where = message.partition(" - at `$")
    where = where.rstrip("`").lstrip(".")
    if reason.startswith("Object contains unknown field `"):
        key = reason.split("`")[1]
        return f"unknown key '{where + '.' if where else ''}{key}'"
    return f"key '{where}': {reason}" if where else message


def load_config(
    *,
    config_file: str | os.PathLike[str] | None = None,
    flags: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> Config:
    """Build the effective Config; raises ConfigError naming the bad key and where it came from."""
    environ = dict(os.environ if environ is None else environ)
    config_file = config_file or environ.get("MEMORYD_CONFIG") or None
    file_data: dict[str, Any] = {}
    if config_file:
        try:
            file_data = tomllib.loads(Path(config_file).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {config_file}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {config_file} is not valid TOML: {exc}") from None
        # Strict check of the file alone, so a wrong type there is reported as the file's.
        _convert(file_data, strict=True, origin=f"file {config_file}")
    env_data = _env_overrides(environ)
    if env_data:
        # Environment values are strings: convert them leniently ("60" -> 60).
        _convert(_merge(file_data, env_data), strict=False, origin="environment MEMORYD_*")
    flag_data = {key: value for key, value in (flags or {}).items() if value is not None}
    config = _convert(_merge(_merge(file_data, env_data), flag_data), strict=False, origin="command line")
    _check_auth(config.auth)
    return config


def config_reference() -> str:
    """Every key with its default, as TOML; `memoryd config --defaults` prints it."""
    lines = []
    defaults = msgspec.to_builtins(Config())
    for key, value in defaults.items():
        if not isinstance(value, dict):
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in defaults.items():
        if isinstance(value, dict):
            lines.append(f"\n[{key}]")
            lines.extend(f"{sub} = {_toml_value(v)}" for sub, v in value.items())
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)
