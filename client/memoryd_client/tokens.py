"""Signed context tokens, interchangeable with ash's: mint one per sandbox session, verify on the daemon.

A token is JWT-shaped, ``base64url(header) "." base64url(claims) "." base64url(HMAC-SHA256)``,
with header ``{"alg": "HS256", "typ": "ASH_CONTEXT", "ver": 1}`` and claims ``sub`` (the user
id), ``iat`` and ``exp`` (integer Unix seconds), ``ver`` and ``jti``, and optionally ash's
routing claims ``chat_id``, ``chat_type``, ``source_username``, ``source_display_name`` and
``message_id`` (the daemon believes these over any param; others ash sets are ignored).  The
bytes are produced exactly as ash's ``ash.context_token`` produces them (compact JSON with
sorted keys, base64url without padding), and a secret string is decoded exactly as ash decodes
``ASH_CONTEXT_TOKEN_SECRET`` (hex, else base64url, else UTF-8), so with the same secret a
token minted by either side verifies on the other.

Standard library only: the daemon verifies with this module too, so there is one
implementation of the format.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

from ._token_codec import b64url_decode, b64url_encode, json_object, json_segment
from .identifiers import check_identifier, identifier_problem

TOKEN_TYPE = "ASH_CONTEXT"
TOKEN_ALG = "HS256"
TOKEN_VERSION = 1
DEFAULT_TTL_SECONDS = 900
DEFAULT_LEEWAY_SECONDS = 30
#: Far more than any real token (a few hundred bytes); parsing stops before decoding JSON.
MAX_TOKEN_CHARS = 8192

Secret = Union[str, bytes]


class TokenError(ValueError):
    """A token that must not be accepted; ``code`` is one of missing, format, decode, header,
    signature, claims, expired, not_yet_valid; ``reason`` is a short readable sentence."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


#: Optional string claims beyond ``sub``, in ash's names: where the call comes from and who spoke.
ROUTING_CLAIMS = ("chat_id", "chat_type", "source_username", "source_display_name", "message_id")


@dataclass(frozen=True)
class Claims:
    """The verified identity a token carries, and its routing claims (None when absent)."""

    user_id: str
    chat_id: Optional[str]
    issued_at: int
    expires_at: int
    token_id: Optional[str] = None
    chat_type: Optional[str] = None
    source_username: Optional[str] = None
    source_display_name: Optional[str] = None
    message_id: Optional[str] = None


def decode_secret(text: str) -> bytes:
    """A secret string as ash decodes it: hex (even length), else base64url, else UTF-8 bytes."""
    value = text.strip()
    if not value:
        raise ValueError("the token secret is empty")
    if len(value) % 2 == 0:
        try:
            return bytes.fromhex(value)
        except ValueError:
            pass
    try:
        decoded = b64url_decode(value, strict=False)
        if decoded:
            return decoded
    except (binascii.Error, ValueError):
        pass
    return value.encode("utf-8")


def _secret_bytes(secret: Secret) -> bytes:
    key = secret if isinstance(secret, bytes) else decode_secret(secret)
    if not key:
        raise ValueError("the token secret is empty")
    return key


def _sign(key: bytes, signing_input: bytes) -> bytes:
    return hmac.new(key, signing_input, hashlib.sha256).digest()


#: A lifetime: a number and an optional unit (seconds, minutes, hours, days).
_TTL = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*\Z")
_TTL_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_ttl(text: Union[str, int, float]) -> int:
    """Seconds from ``900``, ``90s``, ``15m``, ``2h`` or ``1d``; raises ValueError otherwise."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        match = _TTL.match(str(text).lower())
        if not match:
            raise ValueError(f"invalid TTL {text!r}: use seconds or a number with s, m, h or d (e.g. 15m)")
        seconds = float(match.group(1)) * _TTL_UNITS[match.group(2)]
    if not seconds >= 1:
        raise ValueError(f"invalid TTL {text!r}: must be at least 1 second")
    return int(seconds)


def mint_token(
    secret: Secret,
    user_id: str,
    chat_id: Optional[str] = None,
    ttl: Union[str, int, float] = DEFAULT_TTL_SECONDS,
    *,
    now: Optional[float] = None,
    chat_type: Optional[str] = None,
    source_username: Optional[str] = None,
    source_display_name: Optional[str] = None,
    message_id: Optional[str] = None,
) -> str:
    """A signed context token for ``user_id`` (and ``chat_id``), valid for ``ttl``.

    ``secret`` is the daemon's ``auth.token_secret`` string (decoded like ash's) or raw key
    bytes; ``ttl`` is seconds or a string like ``"15m"``; ``now`` overrides the clock (Unix
    seconds), e.g. to mint an already expired token in a test.  ``chat_type`` (private, group,
    supergroup) decides what the disclosure rules let the session see; the speaker and message
    are recorded with what it adds.  Blank routing values are left out, as ash leaves them out;
    ``user_id`` and ``chat_id`` must follow the identifier rule (``identifiers.py``): ValueError
    otherwise, never a silently changed id.
    """
    key = _secret_bytes(secret)
    if user_id is None or user_id == "":
        raise ValueError("user_id is required")
    subject = check_identifier("user_id", user_id)
    if chat_id is not None and chat_id != "":
        check_identifier("chat_id", chat_id)
    issued_at = int(time.time() if now is None else now)
    claims: Dict[str, Any] = {
        "ver": TOKEN_VERSION,
        "sub": subject,
        "iat": issued_at,
        "exp": issued_at + parse_ttl(ttl),
        "jti": uuid.uuid4().hex,
    }
    routing = {
        "chat_id": chat_id,
        "chat_type": chat_type,
        "source_username": source_username,
        "source_display_name": source_display_name,
        "message_id": message_id,
    }
    for name, value in routing.items():
        text = value if name == "chat_id" else value.strip() if isinstance(value, str) else None
        if text:
            claims[name] = text
    header = {"alg": TOKEN_ALG, "typ": TOKEN_TYPE, "ver": TOKEN_VERSION}
    signing_input = f"{json_segment(header)}.{json_segment(claims)}"
    signature = _sign(key, signing_input.encode("ascii"))
    return f"{signing_input}.{b64url_encode(signature)}"


def verify_token(
    token: str,
    secret: Secret,
    *,
    leeway: int = DEFAULT_LEEWAY_SECONDS,
    now: Optional[float] = None,
) -> Claims:
    """The claims of a valid token; raises TokenError saying why a token is refused.

    The signature is checked (in constant time) before any claim is trusted; ``iat`` and
    ``exp`` are checked with ``leeway`` seconds of tolerance for clock skew.
    """
    key = _secret_bytes(secret)
    text = token.strip() if isinstance(token, str) else ""
    if not text:
        raise TokenError("missing", "context token is missing")
    if len(text) > MAX_TOKEN_CHARS:
        raise TokenError("format", "context token is too long")
    parts = text.split(".")
    if len(parts) != 3:
        raise TokenError("format", "context token is not three dot-separated parts")
    encoded_header, encoded_claims, encoded_signature = parts
    try:
        header = json_object(b64url_decode(encoded_header))
        claims = json_object(b64url_decode(encoded_claims))
        signature = b64url_decode(encoded_signature)
    except (ValueError, binascii.Error, RecursionError):  # JSONDecodeError, UnicodeDecodeError: ValueErrors
        raise TokenError("decode", "context token is not valid base64url JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenError("decode", "context token header or claims are not JSON objects")
    if header.get("alg") != TOKEN_ALG or header.get("typ") != TOKEN_TYPE:
        raise TokenError("header", f"context token header must say alg {TOKEN_ALG}, typ {TOKEN_TYPE}")
    expected = _sign(key, f"{encoded_header}.{encoded_claims}".encode("ascii"))
    if not hmac.compare_digest(signature, expected):
        raise TokenError("signature", "context token signature does not match")

    issued_at = _int_claim(claims, "iat")
    expires_at = _int_claim(claims, "exp")
    if issued_at is None or expires_at is None:
        raise TokenError("claims", "context token needs integer iat and exp claims")
    current = int(time.time() if now is None else now)
    if issued_at - leeway > current:
        raise TokenError("not_yet_valid", "context token is not valid yet (iat is in the future)")
    if expires_at + leeway < current:
        raise TokenError("expired", "context token expired")
    subject = _identifier_claim(claims, "sub")
    if subject is None:
        raise TokenError("claims", "context token has no sub (user id) claim")
    return Claims(
        user_id=subject,
        issued_at=issued_at,
        expires_at=expires_at,
        token_id=_str_claim(claims, "jti"),
        chat_id=_identifier_claim(claims, "chat_id"),
        **{name: _str_claim(claims, name) for name in ROUTING_CLAIMS if name != "chat_id"},
    )


def _int_claim(claims: Dict[str, Any], name: str) -> Optional[int]:
    value = claims.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):  # ash accepts digit strings too
        text = value.strip()
        if text.isascii() and text.isdigit():
            return int(text)
    return None


def _str_claim(claims: Dict[str, Any], name: str) -> Optional[str]:
    value = claims.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise TokenError("claims", f"context token claim {name} must be a string")
    if "\x00" in value or any("\ud800" <= char <= "\udfff" for char in value):
        raise TokenError("claims", f"context token claim {name} has a NUL character or a lone surrogate")
    return value.strip() or None


def _identifier_claim(claims: Dict[str, Any], name: str) -> Optional[str]:
    """``sub`` or ``chat_id`` exactly as signed (never stripped), under the identifier rule."""
    value = claims.get(name)
    if value is None or value == "":
        return None
    problem = identifier_problem(value)
    if problem is not None:
        raise TokenError("claims", f"context token claim {name} {problem}")
    return str(value)
