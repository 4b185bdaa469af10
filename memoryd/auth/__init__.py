"""Caller identity: trust mode, or signed context tokens (ash-compatible) in token mode."""

from memoryd.auth.authenticator import (
    NO_ROUTING,
    Authenticator,
    AuthMode,
    Caller,
    Routing,
)
from memoryd.auth.tokens import (
    Claims,
    TokenError,
    load_token_secret,
    mint_token,
    verify_token,
)

__all__ = [
    "NO_ROUTING",
    "AuthMode",
    "Authenticator",
    "Caller",
    "Claims",
    "Routing",
    "TokenError",
    "load_token_secret",
    "mint_token",
    "verify_token",
]
