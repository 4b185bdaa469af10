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

import base64
import binascii
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from memoryd.lazy import LazyPattern

SecretKind = Literal["api_key", "password", "bearer_token", "jwt", "private_key", "card_number", "connection_string"]
SecretsMode = Literal["refuse", "redact"]
REDACTED = "[redacted]"

# Each pattern's group "secret" (else the whole match) is the span that is redacted.
# ``(?<![A-Za-z0-9])`` instead of ``\b``: "_" is a word character, so ``\bkey`` never matches in
# "aws_secret_access_key".
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
    ("bearer_token", LazyPattern(r"\bBasic\s+(?P<secret>[A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])")),
    (
        "api_key",
        LazyPattern(
            r"(?<![A-Za-z0-9])(?:"
            r"sk-[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic (sk-ant-..., sk-proj-...)
            r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
            r"|xox[abposre]-[A-Za-z0-9-]{10,}"  # Slack
            r"|hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]{16,}"  # Slack webhook
            r"|(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key ids
            r"|AIza[0-9A-Za-z_-]{35}"  # Google
            r"|(?:[rs]k|whsec)_(?:(?:live|test)_)?[0-9A-Za-z]{16,}"  # Stripe
            r"|glpat-[0-9A-Za-z_-]{20,}|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{36}"  # GitLab, HF, npm
            r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"  # SendGrid
            r"|SK[0-9a-f]{32}|AC[0-9a-f]{32}"  # Twilio
            r"|key-[0-9a-f]{32}"  # Mailgun
            r"|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"  # Shopify
            r"|do[opr]_v1_[a-f0-9]{64}"  # DigitalOcean
            r"|pypi-[A-Za-z0-9_-]{50,}"  # PyPI
            r"|hvs\.[A-Za-z0-9_-]{24,}"  # HashiCorp Vault
            r"|(?:glsa|sntrys|gsk|lin_api|ntn|PMAK)[_-][A-Za-z0-9_-]{20,}"  # Grafana, Sentry, Groq, Linear, Notion, Postman
            r"|AGE-SECRET-KEY-1[0-9A-Z]{50,}"  # age
            r"|\d{8,10}:AA[A-Za-z0-9_-]{33}"  # Telegram bot token
            r")(?![A-Za-z0-9])"
        ),
    ),
    (
        "connection_string",
        # Bounded repeats: an unbounded scheme would make a long "a-a-a-..." quadratic.
        LazyPattern(
            r"(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]{0,30}://[^\s:/@]{1,256}:(?P<secret>[^\s@/]{1,256})@[^\s/@]"
        ),
    ),
]

# "password is X", "pw: X", "passphrase = 'X'", "the password for the router is X", "PIN is 4821".
_PASSWORD = LazyPattern(
    r"(?<![A-Za-z0-9])(?P<word>pass(?:word|wd|phrase|code)|pwd|pw|pin(?:\s+code)?)(?![A-Za-z0-9])[\"']?"
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
    she one something anything nothing none n/a null see check ask please use""".split()
)
# A long token after key/token/secret words: "API key: 3f9a...", "token=abc123..."
_KEYWORD_TOKEN = LazyPattern(
    r"(?<![A-Za-z0-9])(?:api[ _-]?key|access[ _-]?key|secret(?:[ _-]?key)?|client[ _-]?secret|auth[ _-]?token"
    r"|access[ _-]?token|token|key)(?![A-Za-z0-9])[\"']?(?:\s+(?:is|was|=)|\s*[:=])?\s*[\"'`]?"
    r"(?P<secret>[A-Za-z0-9_\-./+=]{16,})",
    re.IGNORECASE,
)
# An assignment to a credential-named variable, as in an .env file, a config or a shell:
# DATABASE_PASSWORD=..., SENTRY_AUTH_TOKEN: ..., aws_secret_access_key = ..., db.password="...".
_ASSIGNMENT = LazyPattern(
    r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z][A-Za-z0-9]*(?:[_.-][A-Za-z0-9]+)*)[\"']?\s*(?::=|=>|=|:)\s*"
    r"(?:(?P<quote>[\"'`])(?P<quoted>[^\"'`\n]{4,300})(?P=quote)|(?P<secret>[^\s\"'`,;]{6,}))"
)
#: Parts of a variable name that say its value is a credential; "key" alone is weaker (sort_key,
#: primary_key) and needs a value that looks random.
_STRONG_NAME = LazyPattern(
    r"pass(?:word|wd|phrase)?|pwd|secret|token|credentials?|api[_.-]?key|access[_.-]?key|private[_.-]?key"
    r"|auth[_.-]?key|signing[_.-]?key|dsn|session[_.-]?key|encryption[_.-]?key",
    re.IGNORECASE,
)
_WEAK_NAME = LazyPattern(r"(?:^|[_.-])key(?:$|[_.-])|(?<![a-z])key$|^key", re.IGNORECASE)
#: Characters a secret's value may go on with after a pattern's own span ends ("Sup3rS3cret!2024").
_SECRET_TAIL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./+=!@#$%^&*~?")
_CARD = LazyPattern(r"(?<![\d.,-])[2-6]\d(?:[ -]?\d){11,17}(?![\d-])")
#: A run long enough to be a base64-wrapped secret (a short one holds too little to matter).
_LINE_BREAK_IN_TOKEN = LazyPattern(r"(?<=\S)[\r\n]+(?=\S)")
_BASE64_RUN = LazyPattern(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")


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
    """Every secret in ``text``, in order, overlapping finds merged (the earlier kind wins).

    The patterns run on normalised views of the text, and each find is mapped back to the span
    of ``text`` it came from: format characters (zero-width spaces and joiners, soft hyphens)
    removed, compatibility forms folded (NFKC: fullwidth ``ＡＫＩＡ`` is ``AKIA``) and Cyrillic
    and Greek look-alikes read as the Latin letters they imitate; the same
    with line breaks inside a token joined ("AKIA...\n...EXAMPLE"); and each long base64 run
    decoded, a run whose text holds a secret being a secret as a whole."""
    view = _normalised(text)
    findings = [view.original(f) for f in _candidates(view.text)]
    joined = _joined(view)
    if joined is not None:
        findings.extend(view.original(joined.original(f)) for f in _candidates(joined.text))
    findings.extend(view.original(f) for f in _base64_wrapped(view.text))
    findings = sorted(findings, key=lambda f: (f.start, -f.end))
    merged: list[Finding] = []
    for finding in findings:
        if merged and finding.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Finding(last.kind, last.start, max(last.end, finding.end))
            continue
        merged.append(finding)
    return merged


@dataclass(frozen=True)
class _View:
    """A rewritten text and, for each of its characters, the index in the text it came from."""

    text: str
    origin: list[int] | None  # None: the identity

    def original(self, finding: Finding) -> Finding:
        if self.origin is None:
            return finding
        start = self.origin[finding.start]
        end = self.origin[finding.end - 1] + 1
        return Finding(finding.kind, start, end)


#: Cyrillic and Greek letters drawn like Latin ones ("АКІА" in Cyrillic reads as AKIA): NFKC
#: keeps them apart, a reader (and a key's consumer after a copy-paste fix) does not.
_LOOKALIKES = dict(zip(
    "АВЕКМНОРСТХІЅЈаеорсухіѕјΑΒΕΖΗΙΚΜΝΟΡΤΥΧον",
    "ABEKMHOPCTXISJaeopcyxisjABEZHIKMNOPTYXov",
    strict=True,
))  # fmt: skip


def _normalised(text: str) -> _View:
    if text.isascii():
        return _View(text, None)
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if unicodedata.category(char) == "Cf":
            continue  # zero-width space, joiners, soft hyphen, BOM: invisible, and split a key
        folded = char
        if ord(char) > 127:
            folded = unicodedata.normalize("NFKC", char)
            folded = _LOOKALIKES.get(folded, folded)
        chars.append(folded)
        origin.extend([index] * len(folded))
    return _View("".join(chars), origin)


def _joined(view: _View) -> _View | None:
    """``view`` with each line break between two non-space characters removed, or None when
    there is none: a key split over lines is one key."""
    text = view.text
    if "\n" not in text and "\r" not in text:
        return None
    chars: list[str] = []
    origin: list[int] = []
    position = 0
    for match in _LINE_BREAK_IN_TOKEN.finditer(text):
        chars.append(text[position : match.start()])
        origin.extend(range(position, match.start()))
        position = match.end()
    if not position:
        return None
    chars.append(text[position:])
    origin.extend(range(position, len(text)))
    return _View("".join(chars), origin)  # in view's coordinates: view.original maps on


def _base64_wrapped(text: str) -> Iterator[Finding]:
    """Long base64 runs whose decoded text holds a secret: the whole run is that secret."""
    if len(text) < 24:
        return
    for match in _BASE64_RUN.finditer(text):
        run = match.group()
        decoded = _decode_base64(run)
        if decoded is None:
            continue
        inner = find_secrets(decoded) if len(decoded) < 8192 else []
        if inner:
            yield Finding(inner[0].kind, match.start(), match.end())


def _decode_base64(run: str) -> str | None:
    """The printable text ``run`` encodes (standard or URL-safe alphabet), else None."""
    padded = run + "=" * (-len(run) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(1 for char in decoded if char.isprintable() or char in "\n\r\t")
    return decoded if decoded and printable == len(decoded) else None


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
    "bearer_token": ("bearer", "basic"),
    "api_key": (
        "sk-",
        "gh",
        "github_pat_",
        "xox",
        "hooks.slack",
        "akia",
        "asia",
        "aiza",
        "k_",
        "whsec_",
        "glpat-",
        "hf_",
        "npm_",
        "sg.",
        "sk",
        "ac",
        "key-",
        "shp",
        "do",
        "pypi-",
        "hvs.",
        "glsa",
        "sntrys",
        "gsk",
        "lin_api",
        "ntn",
        "pmak",
        "age-secret",
        ":aa",
    ),
    "connection_string": ("://",),
    "password": ("pass", "pw", "pin"),
    "keyword_token": ("key", "token", "secret"),
    "assignment": ("=", ":"),
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
    if _hinted(lowered, "assignment"):
        for match in _ASSIGNMENT.finditer(text):
            if _credential_assignment(match):
                yield _finding(
                    "password"
                    if "pass" in match.group("name").lower() or "pwd" in match.group("name").lower()
                    else "api_key",
                    match,
                )
    for match in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn_ok(digits):
            yield Finding("card_number", match.start(), match.end())


def _credential_assignment(match: re.Match[str]) -> bool:
    """An assignment whose name says credential and whose value is one, not a reference to one
    (``$DB_PASSWORD``, ``${TOKEN}``, ``<your key>``) or a setting (``max_tokens=4096``)."""
    name = match.group("name")
    if not (any(sep in name for sep in "_.-") or name.isupper()):
        return False  # "password: ..." in prose is the password rule's
    value = (match.group("quoted") or match.group("secret") or "").strip().rstrip(".,;:")
    if len(value) < 4 or value[0] in "$<{%[(" or _looks_like_prose(value):
        return False
    if _STRONG_NAME.search(name):
        if value.isdigit():
            return bool(re.search(r"pass|pwd|pin", name, re.IGNORECASE)) and len(value) >= 4
        return len(value) >= 6 or match.group("quoted") is not None
    return bool(_WEAK_NAME.search(name)) and _high_entropy(value)


def _finding(kind: SecretKind, match: re.Match[str]) -> Finding:
    """The span of the pattern's ``quoted`` or ``secret`` group, else of the whole match,
    without the sentence's trailing punctuation ("pw: hunter2, and ..."), and with the rest of
    the token when the pattern stopped inside it (a redacted secret leaves no tail behind)."""
    group: str | int = next((g for g in ("quoted", "secret") if g in match.re.groupindex and match.group(g)), 0)
    start, end = match.start(group), match.end(group)
    text = match.string
    if kind in ("api_key", "password", "bearer_token") and group != "quoted":
        while end < len(text) and text[end] in _SECRET_TAIL:
            end += 1
    while end > start + 1 and text[end - 1] in ".,;:!?":
        end -= 1
    return Finding(kind, start, end)


def _looks_like_prose(value: str) -> bool:
    """True when the word after "password is" is the sentence going on, or a reference to a
    value kept elsewhere (``$DB_PASSWORD``, ``${TOKEN}``, ``<your password>``), not a password."""
    word = value.rstrip(".,;:!?)")
    return not word or word.lower() in _NOT_A_PASSWORD or word[0] in "$<{%"


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
