"""Caller identity: trust mode, or signed context tokens (ash-compatible) in token mode."""

from memoryd.auth.authenticator import Authenticator, AuthMode, Caller
from memoryd.auth.tokens import Claims, TokenError, load_token_secret, mint_token, verify_token

__all__ = [
    "AuthMode",
    "Authenticator",
    "Caller",
    "Claims",
    "TokenError",
    "load_token_secret",
    "mint_token",
    "verify_token",
]
