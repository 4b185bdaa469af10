"""Finds credentials in text, so memoryd never stores them: run on every extracted fact and on
``memory.add``.  ``extraction.secrets`` chooses between refusing the text and redacting it.

What counts (each a :data:`SecretKind`):

- ``api_key``: well-known key prefixes (OpenAI/Anthropic ``sk-``, GitHub ``ghp_``/``github_pat_``,
  Slack ``xox?-``, AWS ``AKIA``/``ASIA``, Google ``AIza``, Stripe, GitLab, Hugging Face, npm), and
  a long high-entropy token right after a word such as key, token or secret;
- ``password``: the value in "password is X", "pw: X", "passphrase = X", "PIN is 1234";
- ``bearer_token`` and ``jwt``; ``private_key``: a PEM/PGP private key block;
- ``card_number``: 13 to 19 digits (spaces or dashes allowed) that pass Luhn and start like a
  card network's number (2-6), which keeps ISBNs (978...), timestamps and phone numbers out;
- ``connection_string``: the password in ``scheme://user:password@host``.

The patterns lean towards missing an odd secret rather than refusing ordinary sentences: a
memory store that refuses "my password manager is 1Password" is one people stop using.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from memoryd.lazy import LazyPattern

SecretKind = Literal[
    "api_key", "password", "bearer_token", "jwt", "private_key", "card_number", "connection_string"
]
SecretsMode = Literal["refuse", "redact"]
REDACTED = "[redacted]"

# Each pattern's group "secret" (else the whole match) is the span that is redacted.
_PATTERNS: list[tuple[SecretKind, LazyPattern]] = [
    (
        "private_key",
        LazyPattern(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
            re.DOTALL,
        ),
    ),
    ("jwt", LazyPattern(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer_token", LazyPattern(r"\bBearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)", re.IGNORECASE)),
    (
        "api_key",
        LazyPattern(
            r"(?<![A-Za-z0-9])(?:"
            r"sk-[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic (sk-ant-..., sk-proj-...)
            r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
            r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
            r"|(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key ids
            r"|AIza[0-9A-Za-z_-]{35}"  # Google
            r"|[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"  # Stripe
            r"|glpat-[0-9A-Za-z_-]{20,}|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{36}"  # GitLab, HF, npm
            r")(?![A-Za-z0-9])"
        ),
    ),
    (
        "connection_string",
        # Bounded repeats: an unbounded scheme would make a long "a-a-a-..." quadratic.
        LazyPattern(r"(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]{0,30}://[^\s:/@]{1,256}:(?P<secret>[^\s@/]{1,256})@[^\s/@]"),
    ),
]

# "password is X", "pw: X", "passphrase = 'X'", "the password for the router is X", "PIN is 4821".
_PASSWORD = LazyPattern(
    r"\b(?P<word>pass(?:word|wd|phrase|code)|pwd|pw|pin(?:\s+code)?)\b[\"']?"
    r"(?:\s+(?:for|to|of|on)\s+(?:(?:the|my|our|your|his|her|their)\s+)?[\w.-]+)?"
    r"(?:\s+(?:is|was|=)|\s*[:=]|\s+(?:is|was)\s*:)\s*"
    r"(?:(?P<quote>[\"'`])(?P<quoted>[^\"'`\n]{1,200})(?P=quote)|(?P<secret>[^\s\"'`]+))",
    re.IGNORECASE,
)
# Words that follow "password is" in sentences that hold no password.
_NOT_A_PASSWORD = frozenset(
    """a an the my your his her their our its this that these those what which who required
    needed necessary mandatory optional wrong incorrect correct invalid valid right strong weak
    secure insecure safe unsafe long short expired expiring expires too not no now still also
    always never being been hidden encrypted hashed salted new old same different set unset saved
    stored kept changed reset missing empty blank case sensitive fine ok okay good bad simple
    complex easy hard secret private shared unknown forgotten lost in on at for from with of to by
    via about managed sent protected locked correctly only just really very it they we you i he
    she one something anything nothing none n/a null""".split()
)
# A long token after key/token/secret words: "API key: 3f9a...", "token=abc123..."
_KEYWORD_TOKEN = LazyPattern(
    r"\b(?:api[ _-]?key|access[ _-]?key|secret(?:[ _-]?key)?|client[ _-]?secret|auth[ _-]?token"
    r"|access[ _-]?token|token|key)\b[\"']?(?:\s+(?:is|was|=)|\s*[:=])?\s*[\"'`]?"
    r"(?P<secret>[A-Za-z0-9_\-./+=]{16,})",
    re.IGNORECASE,
)
_CARD = LazyPattern(r"(?<![\d.,-])[2-6]\d(?:[ -]?\d){11,17}(?![\d-])")


@dataclass(frozen=True)
class Finding:
    kind: SecretKind
    start: int
    end: int


@dataclass(frozen=True)
class SecretScan:
    """What :func:`scan` found: ``found`` counts by kind; ``text`` is the input with each
    secret replaced by ``[redacted]`` (the input itself when nothing was found)."""

    text: str
    found: dict[SecretKind, int] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not self.found


def find_secrets(text: str) -> list[Finding]:
    """Every secret in ``text``, in order, overlapping finds merged (the earlier kind wins)."""
    findings = sorted(_candidates(text), key=lambda f: (f.start, -f.end))
    merged: list[Finding] = []
    for finding in findings:
        if merged and finding.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Finding(last.kind, last.start, max(last.end, finding.end))
            continue
        merged.append(finding)
    return merged


def scan(text: str) -> SecretScan:
    findings = find_secrets(text)
    if not findings:
        return SecretScan(text)
    parts, position = [], 0
    for finding in findings:
        parts.append(text[position : finding.start])
        parts.append(REDACTED)
        position = finding.end
    parts.append(text[position:])
    return SecretScan("".join(parts), dict(Counter(finding.kind for finding in findings)))


def screen(text: str, mode: SecretsMode) -> tuple[str | None, SecretScan]:
    """``extraction.secrets`` applied to ``text``: (the text to store, or None when it is
    refused; the scan, whose ``found`` the caller counts for system.health)."""
    result = scan(text)
    if result.clean:
        return text, result
    return (None if mode == "refuse" else result.text), result


#: Substrings (of the lower-cased text) without which a pattern cannot match: most texts hold
#: none, and a substring test costs a fraction of a regex scan (16 KiB of prose: 7.5 ms -> 0.6 ms).
_HINTS: dict[str, tuple[str, ...]] = {
    "private_key": ("private key",),
    "jwt": ("eyj",),
    "bearer_token": ("bearer",),
    "api_key": ("sk-", "gh", "github_pat_", "xox", "akia", "asia", "aiza", "k_live_", "k_test_", "glpat-", "hf_", "npm_"),
    "connection_string": ("://",),
    "password": ("pass", "pw", "pin"),
    "keyword_token": ("key", "token", "secret"),
}


def _hinted(lowered: str, name: str) -> bool:
    return any(hint in lowered for hint in _HINTS[name])


def _candidates(text: str) -> Iterator[Finding]:
    lowered = text.lower()
    for kind, pattern in _PATTERNS:
        if _hinted(lowered, kind):
            for match in pattern.finditer(text):
                yield _finding(kind, match)
    if _hinted(lowered, "password"):
        for match in _PASSWORD.finditer(text):
            value = match.group("quoted") or match.group("secret")
            if match.group("word").lower().startswith("pin"):
                if re.fullmatch(r"\d{4,8}", value):
                    yield _finding("password", match)
            elif match.group("quoted") or not _looks_like_prose(value):
                yield _finding("password", match)
    if _hinted(lowered, "keyword_token"):
        for match in _KEYWORD_TOKEN.finditer(text):
            if _high_entropy(match.group("secret")):
                yield _finding("api_key", match)
    for match in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn_ok(digits):
            yield Finding("card_number", match.start(), match.end())


def _finding(kind: SecretKind, match: re.Match[str]) -> Finding:
    """The span of the pattern's ``quoted`` or ``secret`` group, else of the whole match,
    without the sentence's trailing punctuation ("pw: hunter2, and ...")."""
    group: str | int = next((g for g in ("quoted", "secret") if g in match.re.groupindex and match.group(g)), 0)
    start, end = match.start(group), match.end(group)
    while end > start + 1 and match.string[end - 1] in ".,;:":
        end -= 1
    return Finding(kind, start, end)


def _looks_like_prose(value: str) -> bool:
    """True when the word after "password is" is the sentence going on, not a password."""
    word = value.rstrip(".,;:!?)")
    return not word or word.lower() in _NOT_A_PASSWORD


def _high_entropy(token: str) -> bool:
    """Letters and digits mixed, and about as varied as a random key (> 3 bits per character):
    "2024-01-15", "abcdefghijklmnop" and file paths stay out."""
    token = token.rstrip(".,;:")
    if len(token) < 16 or not re.search(r"\d", token) or not re.search(r"[A-Za-z]", token):
        return False
    if "/" in token and not re.search(r"[A-Z]", token):
        return False  # a lowercase path such as docs/setup/v2/install-guide
    counts = Counter(token)
    entropy = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    return entropy > 3.0


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0
