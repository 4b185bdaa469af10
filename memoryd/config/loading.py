"""Loading the configuration: flags > env (MEMORYD_<NAME>) > TOML file > defaults.

Every key of the file can also come from the environment: top-level keys as ``MEMORYD_<KEY>``,
keys of a table as ``MEMORYD_<TABLE>_<KEY>`` (``MEMORYD_LIMITS_IDLE_TIMEOUT=60``).  An unknown
key or a wrong type in the file or the environment stops start-up with a message naming it and,
for a misspelt key, the nearest valid one: a setting that is silently ignored is worse than a
daemon that refuses to start.  The few ``MEMORYD_*`` variables that are not config keys are
listed in :data:`NOT_CONFIG_KEYS`.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any, get_origin

import msgspec

from memoryd.config.sections import AuthConfig, Config, Section
from memoryd.errors import ConfigError

ENV_PREFIX = "MEMORYD_"
#: The MEMORYD_* variables that are not config keys, and so are allowed in the daemon's
#: environment beside them.  Every MEMORYD_* name the client library (client/) or the sandbox
#: CLI (sandbox-cli/) reads is either here or a config key (MEMORYD_SOCKET is both the client's
#: and the daemon's socket), because a sandbox's environment often reaches a daemon started from
#: it; tests/test_config_env_keys.py checks that.
NOT_CONFIG_KEYS: dict[str, str] = {
    "MEMORYD_CONFIG": "the config file to read (the daemon's own, like --config)",
    "MEMORYD_FUZZ_LONG": "the test suite's switch for a long protocol fuzz run",
}


def _sections() -> dict[str, type[Section]]:
    return {
        field.name: field.type
        for field in msgspec.structs.fields(Config)
        if isinstance(field.type, type) and issubclass(field.type, Section)
    }


def env_names() -> list[str]:
    """Every MEMORYD_* variable that sets a config key."""
    sections = _sections()
    names = [ENV_PREFIX + f.name.upper() for f in msgspec.structs.fields(Config) if f.name not in sections]
    for section, section_type in sections.items():
        names += [f"{ENV_PREFIX}{section.upper()}_{f.name.upper()}" for f in msgspec.structs.fields(section_type)]
    return names


def _did_you_mean(name: str, candidates: list[str], prefix: str = "") -> str:
    """`` (did you mean X?)`` for the closest of ``candidates``, or "" when none is close."""
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""


def _unknown_env_name(name: str) -> ConfigError:
    nearest = _did_you_mean(name, env_names() + list(NOT_CONFIG_KEYS))
    return ConfigError(f"invalid configuration (environment MEMORYD_*): unknown variable {name}{nearest}")


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """MEMORYD_* variables as a nested dict of raw strings, keyed like the TOML file."""
    sections = _sections()
    top_keys = {f.name for f in msgspec.structs.fields(Config)} - set(sections)
    overrides: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name in NOT_CONFIG_KEYS:
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
        else:
            raise _unknown_env_name(name)
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
        raise ConfigError(
            f'invalid configuration ({origin}): socket_mode must be an octal string like "0600"'
        ) from None
    return config


def _check_auth(auth: AuthConfig) -> None:
    # Checked on the merged result only: the secret often comes from another layer than the
    # mode (mode in the file, MEMORYD_AUTH_TOKEN_SECRET from a credentials store).
    if auth.token_secret and auth.token_secret_file:
        raise ConfigError("invalid configuration: set auth.token_secret or auth.token_secret_file, not both")
    if auth.mode == "token" and not (auth.token_secret or auth.token_secret_file):
        raise ConfigError('invalid configuration: auth.mode "token" needs auth.token_secret or auth.token_secret_file')


def _describe(exc: msgspec.ValidationError) -> str:
    # msgspec says "Expected `int`, got `str` - at `$.limits.idle_timeout`"; name the key plainly.
    message = str(exc)
    reason, _, where = message.partition(" - at `$")
    where = where.rstrip("`").lstrip(".")
    if reason.startswith("Object contains unknown field `"):
        key = reason.split("`")[1]
        return f"unknown key '{where + '.' if where else ''}{key}'{_nearest_key(where, key)}"
    return f"key '{where}': {reason}" if where else message


def _nearest_key(table: str, key: str) -> str:
    """`` (did you mean X?)`` for an unknown ``key`` of ``table`` ("" for the top level)."""
    struct_type = _sections().get(table) if table else Config
    if struct_type is None:
        return ""
    valid = [field.name for field in msgspec.structs.fields(struct_type)]
    return _did_you_mean(key, valid, prefix=f"{table}." if table else "")


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
