"""The rules that turn pattern matches into finds: a password that is not the sentence going
on, an assignment whose name and value both say credential, a token random enough to be a
key, a card number that passes Luhn."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator

from memoryd.secrets.patterns import (
    ASSIGNMENT,
    CARD,
    KEYWORD_TOKEN,
    NOT_A_PASSWORD,
    PASSWORD,
    PATTERNS,
    SECRET_TAIL,
    STRONG_NAME,
    WEAK_NAME,
    Finding,
    SecretKind,
    hinted,
)


def candidates(text: str) -> Iterator[Finding]:
    lowered = text.lower()
    for kind, pattern in PATTERNS:
        if hinted(lowered, kind):
            for match in pattern.finditer(text):
                yield finding(kind, match)
    if hinted(lowered, "password"):
        for match in PASSWORD.finditer(text):
            value = match.group("quoted") or match.group("secret")
            if match.group("word").lower().startswith("pin"):
                if re.fullmatch(r"\d{4,8}", value):
                    yield finding("password", match)
            elif match.group("quoted") or not looks_like_prose(value):
                yield finding("password", match)
    if hinted(lowered, "keyword_token"):
        for match in KEYWORD_TOKEN.finditer(text):
            if high_entropy(match.group("secret")):
                yield finding("api_key", match)
    if hinted(lowered, "assignment"):
        for match in ASSIGNMENT.finditer(text):
            if credential_assignment(match):
                yield finding(
                    "password"
                    if "pass" in match.group("name").lower() or "pwd" in match.group("name").lower()
                    else "api_key",
                    match,
                )
    for match in CARD.finditer(text):
        digits = re.sub(r"[ -]", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_ok(digits):
            yield Finding("card_number", match.start(), match.end())


def credential_assignment(match: re.Match[str]) -> bool:
    """An assignment whose name says credential and whose value is one, not a reference to one
    (``$DB_PASSWORD``, ``${TOKEN}``, ``<your key>``) or a setting (``max_tokens=4096``)."""
    name = match.group("name")
    if not (any(sep in name for sep in "_.-") or name.isupper()):
        return False  # "password: ..." in prose is the password rule's
    value = (match.group("quoted") or match.group("secret") or "").strip().rstrip(".,;:")
    if len(value) < 4 or value[0] in "$<{%[(" or looks_like_prose(value):
        return False
    if STRONG_NAME.search(name):
        if value.isdigit():
            return bool(re.search(r"pass|pwd|pin", name, re.IGNORECASE)) and len(value) >= 4
        return len(value) >= 6 or match.group("quoted") is not None
    return bool(WEAK_NAME.search(name)) and high_entropy(value)


def finding(kind: SecretKind, match: re.Match[str]) -> Finding:
    """The span of the pattern's ``quoted`` or ``secret`` group, else of the whole match,
    without the sentence's trailing punctuation ("pw: hunter2, and ..."), and with the rest of
    the token when the pattern stopped inside it (a redacted secret leaves no tail behind)."""
    group: str | int = next((g for g in ("quoted", "secret") if g in match.re.groupindex and match.group(g)), 0)
    start, end = match.start(group), match.end(group)
    text = match.string
    if kind in ("api_key", "password", "bearer_token") and group != "quoted":
        while end < len(text) and text[end] in SECRET_TAIL:
            end += 1
    while end > start + 1 and text[end - 1] in ".,;:!?":
        end -= 1
    return Finding(kind, start, end)


def looks_like_prose(value: str) -> bool:
    """True when the word after "password is" is the sentence going on, or a reference to a
    value kept elsewhere (``$DB_PASSWORD``, ``${TOKEN}``, ``<your password>``), not a password."""
    word = value.rstrip(".,;:!?)")
    return not word or word.lower() in NOT_A_PASSWORD or word[0] in "$<{%"


def high_entropy(token: str) -> bool:
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


def luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0
