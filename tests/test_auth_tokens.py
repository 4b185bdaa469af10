"""Context tokens: the exact ash format both ways, the secret encoding, and every refusal."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import pytest

from memoryd_client import mint_token as client_mint_token
from memoryd_client.tokens import Claims, TokenError, decode_secret, mint_token, parse_ttl, verify_token

SECRET_HEX = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
SECRET = bytes.fromhex(SECRET_HEX)
NOW = 1_700_000_000


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def ash_style_token(key: bytes, header: dict[str, Any], claims: dict[str, Any]) -> str:
    """A token put together the way ash's ContextTokenService does it, independently of ours:
    compact sorted JSON, unpadded base64url, HMAC-SHA256 over ``header.claims``."""

    def encode(value: dict[str, Any]) -> str:
        return b64url(json.dumps(value, separators=(",", ":"), sort_keys=True).encode())

    signing_input = f"{encode(header)}.{encode(claims)}"
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


ASH_HEADER = {"alg": "HS256", "typ": "ASH_CONTEXT", "ver": 1}


def ash_claims(**overrides: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "ver": 1,
        "sub": "alice",
        "iat": NOW,
        "exp": NOW + 900,
        "jti": "0" * 32,
        "chat_id": "team",
    }
    claims.update(overrides)
    return {key: value for key, value in claims.items() if value is not None}


def test_minted_token_has_ashs_exact_header_and_claim_types() -> None:
    token = mint_token(SECRET, "alice", "team", ttl=900, now=NOW)
    header, claims, signature = token.split(".")
    assert "=" not in token
    assert unb64url(header) == b'{"alg":"HS256","typ":"ASH_CONTEXT","ver":1}'
    decoded = json.loads(unb64url(claims))
    assert set(decoded) == {"ver", "sub", "iat", "exp", "jti", "chat_id"}
    assert (decoded["sub"], decoded["chat_id"], decoded["iat"], decoded["exp"]) == ("alice", "team", NOW, NOW + 900)
    assert type(decoded["iat"]) is int and type(decoded["exp"]) is int
    # The payload is compact JSON with sorted keys, byte for byte what ash signs.
    assert unb64url(claims) == json.dumps(decoded, separators=(",", ":"), sort_keys=True).encode()
    assert unb64url(signature) == hmac.new(SECRET, f"{header}.{claims}".encode(), hashlib.sha256).digest()


def test_our_token_equals_an_ash_built_token_with_the_same_claims() -> None:
    token = mint_token(SECRET, "alice", "team", ttl=900, now=NOW)
    claims = json.loads(unb64url(token.split(".")[1]))
    assert token == ash_style_token(SECRET, ASH_HEADER, claims)


def test_a_token_built_like_ashs_verifies_here() -> None:
    token = ash_style_token(SECRET, ASH_HEADER, ash_claims(provider="telegram", chat_type="group"))
    assert verify_token(token, SECRET, now=NOW) == Claims("alice", "team", NOW, NOW + 900, "0" * 32, chat_type="group")


def test_the_client_exports_mint_token_and_accepts_the_secret_string() -> None:
    token = client_mint_token(SECRET_HEX, "bob", None, "15m")
    claims = verify_token(token, SECRET)
    assert (claims.user_id, claims.chat_id, claims.expires_at - claims.issued_at) == ("bob", None, 900)
    assert "chat_id" not in json.loads(unb64url(token.split(".")[1]))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (SECRET_HEX, SECRET),  # hex first
        ("  " + SECRET_HEX.upper() + "\n", SECRET),  # stripped, either case
        ("abcd", b"\xab\xcd"),  # looks like hex: is hex
        (b64url(b"\xfa\xfb\xfc-raw-key-bytes"), b"\xfa\xfb\xfc-raw-key-bytes"),  # then base64url
        ("abc", base64.urlsafe_b64decode("abc=")),  # odd length: not hex, but base64url
        ("pass phrase!", b"pass phrase!"),  # neither: UTF-8 bytes
        ("sécret", "sécret".encode()),
    ],
)
def test_secret_strings_decode_like_ashs(text: str, key: bytes) -> None:
    assert decode_secret(text) == key


def test_an_empty_secret_is_refused() -> None:
    with pytest.raises(ValueError):
        decode_secret("   ")
    with pytest.raises(ValueError):
        mint_token(b"", "alice")


def test_expiry_has_thirty_seconds_of_leeway() -> None:
    token = mint_token(SECRET, "alice", ttl=60, now=NOW)
    assert verify_token(token, SECRET, now=NOW + 60 + 30).user_id == "alice"
    with pytest.raises(TokenError) as refused:
        verify_token(token, SECRET, now=NOW + 60 + 31)
    assert refused.value.code == "expired" and "expired" in refused.value.reason


def test_a_token_from_the_future_is_refused_beyond_the_leeway() -> None:
    token = mint_token(SECRET, "alice", ttl=600, now=NOW + 30)
    assert verify_token(token, SECRET, now=NOW).user_id == "alice"
    early = mint_token(SECRET, "alice", ttl=600, now=NOW + 31)
    with pytest.raises(TokenError) as refused:
        verify_token(early, SECRET, now=NOW)
    assert refused.value.code == "not_yet_valid"


def _with_claims(claims: dict[str, Any], key: bytes = SECRET, header: dict[str, Any] = ASH_HEADER) -> str:
    return ash_style_token(key, header, claims)


def _tampered_sub() -> str:
    header, _claims, signature = mint_token(SECRET, "alice", "team", now=NOW).split(".")
    forged = b64url(json.dumps(ash_claims(sub="bob"), separators=(",", ":"), sort_keys=True).encode())
    return f"{header}.{forged}.{signature}"


def _flipped_signature() -> str:
    header, claims, signature = mint_token(SECRET, "alice", now=NOW).split(".")
    first = "B" if signature[0] == "A" else "A"
    return f"{header}.{claims}.{first}{signature[1:]}"


def _alg_none() -> str:
    header = b64url(json.dumps({"alg": "none", "typ": "ASH_CONTEXT"}).encode())
    claims = b64url(json.dumps(ash_claims()).encode())
    return f"{header}.{claims}."


REFUSED = [
    ("", "missing"),
    ("   ", "missing"),
    ("only.two", "format"),
    ("a.b.c.d", "format"),
    ("x" * 9000, "format"),
    ("%%%.e30.c2ln", "decode"),
    ("e30=.e30.c2ln", "decode"),  # padding is not base64url as both sides emit it
    ("e30+.e30.c2ln", "decode"),
    (b64url(b"not json") + ".e30.c2ln", "decode"),
    (b64url(b"[1]") + "." + b64url(b"{}") + ".c2ln", "decode"),
    (_alg_none(), "header"),
    (_with_claims(ash_claims(), header={"alg": "HS512", "typ": "ASH_CONTEXT"}), "header"),
    (_with_claims(ash_claims(), header={"alg": "HS256", "typ": "JWT"}), "header"),
    (_with_claims(ash_claims(), key=b"another secret of enough bytes!!"), "signature"),
    (_tampered_sub(), "signature"),
    (_flipped_signature(), "signature"),
    (_with_claims(ash_claims(iat=None)), "claims"),
    (_with_claims(ash_claims(exp=True)), "claims"),
    (_with_claims(ash_claims(exp=float(NOW + 900))), "claims"),
    (_with_claims(ash_claims(sub=None)), "claims"),
    (_with_claims(ash_claims(sub="  ")), "claims"),
    (_with_claims(ash_claims(sub=42)), "claims"),
    (_with_claims(ash_claims(chat_id=["team"])), "claims"),
    (_with_claims(ash_claims(exp=NOW - 3600)), "expired"),
    # Deep JSON raised RecursionError (a -32603) before it was bounded.
    (b64url(b"[" * 3000 + b"]" * 3000) + "." + b64url(b"{}") + ".c2ln", "decode"),
    (b64url(b"{}") + "." + b64url(b'{"a":' * 900 + b"1" + b"}" * 900) + ".c2ln", "decode"),
    (b64url(b'{"a":[[[[[1]]]]]}') + "." + b64url(b"{}") + ".c2ln", "decode"),
]


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    token = _with_claims(ash_claims(jti="[[[[[[{{{{{{" + "\\" + '"'), header={**ASH_HEADER, "kid": "]]]]{{{{{"})
    assert verify_token(token, SECRET, now=NOW).user_id == "alice"


@pytest.mark.parametrize(("token", "code"), REFUSED)
def test_bad_tokens_are_refused_with_a_reason(token: str, code: str) -> None:
    with pytest.raises(TokenError) as refused:
        verify_token(token, SECRET, now=NOW)
    assert refused.value.code == code
    assert refused.value.reason


def test_digit_string_times_are_accepted_like_ash_does() -> None:
    token = _with_claims(ash_claims(iat=str(NOW), exp=f" {NOW + 60} "))
    assert verify_token(token, SECRET, now=NOW).expires_at == NOW + 60


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("900", 900), (900, 900), ("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("1.5h", 5400), (" 15M ", 900)],
)
def test_ttl_accepts_seconds_and_units(text: str | int, seconds: int) -> None:
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0.5", "-5m", "15 minutes", "m", "1w", "nan"])
def test_ttl_rejects_nonsense(text: str) -> None:
    with pytest.raises(ValueError):
        parse_ttl(text)


def test_real_clock_round_trip() -> None:
    token = mint_token(SECRET_HEX, "alice", "team")
    claims = verify_token(token, SECRET_HEX)
    assert abs(claims.issued_at - time.time()) < 3600 and claims.expires_at - claims.issued_at == 900
