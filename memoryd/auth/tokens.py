"""Context tokens on the daemon side: the format is the client's (one implementation), plus the secret.

``memoryd_client.tokens`` mints and verifies ash-compatible tokens with the standard library
only; the daemon reuses it so the two can never drift apart.  This module adds what only the
host does: loading the secret from the configuration.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from memoryd.config import AuthConfig
from memoryd.errors import ConfigError
from memoryd.log import fields
from memoryd_client.tokens import (
    DEFAULT_LEEWAY_SECONDS,
    DEFAULT_TTL_SECONDS,
    TOKEN_ALG,
    TOKEN_TYPE,
    Claims,
    TokenError,
    decode_secret,
    mint_token,
    parse_ttl,
    verify_token,
)

__all__ = [
    "DEFAULT_LEEWAY_SECONDS",
    "DEFAULT_TTL_SECONDS",
    "MIN_SECRET_BYTES",
    "TOKEN_ALG",
    "TOKEN_TYPE",
    "Claims",
    "TokenError",
    "decode_secret",
    "load_token_secret",
    "mint_token",
    "parse_ttl",
    "verify_token",
]

log = logging.getLogger("memoryd.auth")

#: HS256 keys shorter than this are guessable offline from one token; refuse them.
MIN_SECRET_BYTES = 16


def load_token_secret(auth: AuthConfig) -> bytes | None:
    """The decoded HMAC key from ``token_secret`` or ``token_secret_file``; None if neither is set.

    Raises ConfigError (naming the key, never the secret) for an unreadable file or a key that
    is too short.
    """
    if auth.token_secret_file:
        path = Path(auth.token_secret_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
            mode = path.stat().st_mode
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"auth.token_secret_file {path}: cannot read it ({type(exc).__name__})") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO) and os.name == "posix":
            log.warning("auth.secret_file_readable_by_others", extra=fields(path=str(path), mode=oct(mode & 0o777)))
        origin, raw = "auth.token_secret_file", text
    elif auth.token_secret:
        origin, raw = "auth.token_secret", auth.token_secret
    else:
        return None
    try:
        key = decode_secret(raw)
    except ValueError:
        raise ConfigError(f"{origin} is empty") from None
    if len(key) < MIN_SECRET_BYTES:
        raise ConfigError(
            f"{origin} decodes to {len(key)} bytes; use at least {MIN_SECRET_BYTES} (e.g. `openssl rand -hex 32`)"
        )
    return key
