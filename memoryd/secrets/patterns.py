"""The patterns that find credentials, the word lists that rule out prose, and the cheap
substring hints that let most texts skip the patterns altogether."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from memoryd.lazy import LazyPattern

SecretKind = Literal["api_key", "password", "bearer_token", "jwt", "private_key", "card_number", "connection_string"]


@dataclass(frozen=True)
class Finding:
    """A secret of ``kind`` at ``text[start:end]``."""

    kind: SecretKind
    start: int
    end: int


# Each pattern's group "secret" (else the whole match) is the span that is redacted.
# ``(?<![A-Za-z0-9])`` instead of ``\b``: "_" is a word character, so ``\bkey`` never matches in
# "aws_secret_access_key".
PATTERNS: list[tuple[SecretKind, LazyPattern]] = [
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
PASSWORD = LazyPattern(
    r"(?<![A-Za-z0-9])(?P<word>pass(?:word|wd|phrase|code)|pwd|pw|pin(?:\s+code)?)(?![A-Za-z0-9])[\"']?"
    r"(?:\s+(?:for|to|of|on)\s+(?:(?:the|my|our|your|his|her|their)\s+)?[\w.-]+)?"
    r"(?:\s+(?:is|was|=)|\s*[:=]|\s+(?:is|was)\s*:)\s*"
    r"(?:(?P<quote>[\"'`])(?P<quoted>[^\"'`\n]{1,200})(?P=quote)|(?P<secret>[^\s\"'`]+))",
    re.IGNORECASE,
)
# Words that follow "password is" in sentences that hold no password.
NOT_A_PASSWORD = frozenset(
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
KEYWORD_TOKEN = LazyPattern(
    r"(?<![A-Za-z0-9])(?:api[ _-]?key|access[ _-]?key|secret(?:[ _-]?key)?|client[ _-]?secret|auth[ _-]?token"
    r"|access[ _-]?token|token|key)(?![A-Za-z0-9])[\"']?(?:\s+(?:is|was|=)|\s*[:=])?\s*[\"'`]?"
    r"(?P<secret>[A-Za-z0-9_\-./+=]{16,})",
    re.IGNORECASE,
)
# An assignment to a credential-named variable, as in an .env file, a config or a shell:
# DATABASE_PASSWORD=..., SENTRY_AUTH_TOKEN: ..., aws_secret_access_key = ..., db.password="...".
ASSIGNMENT = LazyPattern(
    r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z][A-Za-z0-9]*(?:[_.-][A-Za-z0-9]+)*)[\"']?\s*(?::=|=>|=|:)\s*"
    r"(?:(?P<quote>[\"'`])(?P<quoted>[^\"'`\n]{4,300})(?P=quote)|(?P<secret>[^\s\"'`,;]{6,}))"
)
#: Parts of a variable name that say its value is a credential; "key" alone is weaker (sort_key,
#: primary_key) and needs a value that looks random.
STRONG_NAME = LazyPattern(
    r"pass(?:word|wd|phrase)?|pwd|secret|token|credentials?|api[_.-]?key|access[_.-]?key|private[_.-]?key"
    r"|auth[_.-]?key|signing[_.-]?key|dsn|session[_.-]?key|encryption[_.-]?key",
    re.IGNORECASE,
)
WEAK_NAME = LazyPattern(r"(?:^|[_.-])key(?:$|[_.-])|(?<![a-z])key$|^key", re.IGNORECASE)
#: Characters a secret's value may go on with after a pattern's own span ends ("Sup3rS3cret!2024").
SECRET_TAIL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./+=!@#$%^&*~?")
CARD = LazyPattern(r"(?<![\d.,-])[2-6]\d(?:[ -]?\d){11,17}(?![\d-])")


#: Substrings (of the lower-cased text) without which a pattern cannot match: most texts hold
#: none, and a substring test costs a fraction of a regex scan (16 KiB of prose: 7.5 ms -> 0.6 ms).
HINTS: dict[str, tuple[str, ...]] = {
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


def hinted(lowered: str, name: str) -> bool:
    return any(hint in lowered for hint in HINTS[name])
