"""The secrets filter: a table of texts that hold a secret, and of ordinary texts that must pass."""

from __future__ import annotations

import pytest

from memoryd.secrets import REDACTED, find_secrets, scan, screen

# Built from parts so that no scanner of this repository mistakes the fixtures for leaks.
OPENAI_KEY = "sk-" + "proj-" + "Xq7Lm2Nc9Vb4Tz8Rw1Ks6Jd3Hf5"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SLACK_TOKEN = "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl"
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
GOOGLE_KEY = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn\n-----END RSA PRIVATE KEY-----"

POSITIVES = [
    pytest.param(f"My OpenAI key is {OPENAI_KEY}", "api_key", OPENAI_KEY, id="openai-key"),
    pytest.param(f"use {GITHUB_TOKEN} for the repo", "api_key", GITHUB_TOKEN, id="github-token"),
    pytest.param(f"slack bot: {SLACK_TOKEN}", "api_key", SLACK_TOKEN, id="slack-token"),
    pytest.param(f"AWS access key {AWS_KEY} for prod", "api_key", AWS_KEY, id="aws-key-id"),
    pytest.param(f"maps key={GOOGLE_KEY}", "api_key", GOOGLE_KEY, id="google-key"),
    pytest.param(
        "the API key is 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "api_key",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        id="generic-key-after-word",
    ),
    pytest.param(
        "token: Zm9vYmFyMTIzNDU2Nzg5MGFiY2Rl", "api_key", "Zm9vYmFyMTIzNDU2Nzg5MGFiY2Rl", id="generic-token-after-colon"
    ),
    pytest.param("client_secret = 'q8W3e7R2t6Y1u5I0o4P9'", "api_key", "q8W3e7R2t6Y1u5I0o4P9", id="client-secret"),
    pytest.param("My password is hunter2", "password", "hunter2", id="password-is"),
    pytest.param("my gmail password is sunshine", "password", "sunshine", id="password-plain-word"),
    pytest.param("pw: Tr0ub4dor&3", "password", "Tr0ub4dor&3", id="pw-colon"),
    pytest.param("password='correct horse battery'", "password", "correct horse battery", id="password-quoted"),
    pytest.param("The password for the router is admin1234", "password", "admin1234", id="password-for-x-is"),
    pytest.param("wifi passphrase: blue-otter-42", "password", "blue-otter-42", id="passphrase"),
    pytest.param("My bank PIN is 4821", "password", "4821", id="pin"),
    pytest.param(f"Authorization: Bearer {OPENAI_KEY[3:]}", "bearer_token", OPENAI_KEY[3:], id="bearer"),
    pytest.param(f"session token {JWT} expires soon", "jwt", JWT, id="jwt"),
    pytest.param(f"my key:\n{PEM}\nkeep it safe", "private_key", PEM, id="pem-private-key"),
    pytest.param(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA",
        "private_key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA",
        id="pem-without-end",
    ),
    pytest.param("Card: 4111 1111 1111 1111, exp 12/27", "card_number", "4111 1111 1111 1111", id="visa-spaces"),
    pytest.param("amex 3782-822463-10005 on file", "card_number", "3782-822463-10005", id="amex-dashes"),
    pytest.param("pay with 5555555555554444", "card_number", "5555555555554444", id="mastercard-plain"),
    pytest.param("DB is postgres://app:s3cr3t@db.internal:5432/app", "connection_string", "s3cr3t", id="postgres-url"),
    pytest.param("redis://default:Xy9pQ@cache:6379", "connection_string", "Xy9pQ", id="redis-url"),
]


@pytest.mark.parametrize(("text", "kind", "secret"), POSITIVES)
def test_secrets_are_found_and_redacted(text: str, kind: str, secret: str) -> None:
    result = scan(text)
    assert result.found == {kind: 1}
    assert secret not in result.text
    assert REDACTED in result.text


NEGATIVES = [
    pytest.param("I forgot my password again", id="password-word-alone"),
    pytest.param("My password manager is 1Password", id="password-manager"),
    pytest.param("The password is required to log in", id="password-is-required"),
    pytest.param("Her password was changed yesterday", id="password-was-changed"),
    pytest.param("The password is stored in the vault", id="password-is-stored"),
    pytest.param("Use a password: it keeps you safe", id="password-colon-prose"),
    pytest.param("Reset your password at the bank", id="reset-password"),
    pytest.param("My PIN is easy to guess", id="pin-prose"),
    pytest.param("Call me at +1 415 555 0132 or (415) 555-0199", id="phone-numbers"),
    pytest.param("Dial +44 7911 123456 or +49 30 12345678 90", id="international-phones"),
    pytest.param("Born 1990-04-12, married on 2015-06-20 at 14:30", id="dates"),
    pytest.param("ISBN 978-0-306-40615-7 and ISBN 0-306-40615-2", id="isbns"),
    pytest.param("ISBN 9780306406157", id="isbn-13-plain"),
    pytest.param("The order number is 1234567890123 and the amount 4,500.00", id="order-number"),
    pytest.param("Our population is 8000000000 and rising", id="big-number"),
    pytest.param("Timestamp 1700000000000 in ms", id="ms-timestamp"),
    pytest.param("4111 1111 1111 1112 is not a valid card", id="card-failing-luhn"),
    pytest.param("The key insight is that caching helps", id="key-insight"),
    pytest.param("API key is stored in the vault", id="api-key-stored"),
    pytest.param("token: abcdefghijklmnopqrstuvwx", id="token-letters-only"),
    pytest.param("key: docs/setup/v2/install-guide", id="key-lowercase-path"),
    pytest.param("Visit https://example.com:8080/path?q=1 or mail me@example.com", id="plain-urls"),
    pytest.param("She works at sk-hynix in Seoul", id="sk-company-name"),
    pytest.param("I prefer risk-management-framework-guidelines", id="hyphenated-words"),
    pytest.param("The bearer of bad news arrived", id="bearer-prose"),
    pytest.param("Sarah's birthday is March 15, 1988", id="birthday"),
    pytest.param("The Ubuntu release 22.04.3 LTS", id="version"),
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_text_has_no_secrets(text: str) -> None:
    result = scan(text)
    assert result.clean, result.found
    assert result.text == text


def test_several_secrets_are_counted_by_kind_and_each_redacted() -> None:
    text = f"pw: hunter2, key {OPENAI_KEY}, card 4111111111111111, backup key {GITHUB_TOKEN}"
    result = scan(text)
    assert result.found == {"password": 1, "api_key": 2, "card_number": 1}
    assert result.text == f"pw: {REDACTED}, key {REDACTED}, card {REDACTED}, backup key {REDACTED}"


def test_overlapping_matches_count_once() -> None:
    # "api_key = sk-..." matches both the prefix and the keyword rule: one secret.
    findings = find_secrets(f"api_key = {OPENAI_KEY}")
    assert [f.kind for f in findings] == ["api_key"]


def test_screen_refuses_or_redacts_per_mode() -> None:
    text = f"deploy key {GITHUB_TOKEN}"
    refused, found = screen(text, "refuse")
    assert refused is None and found.found == {"api_key": 1}
    redacted, _ = screen(text, "redact")
    assert redacted == f"deploy key {REDACTED}"
    assert screen("David likes tea", "refuse")[0] == "David likes tea"
