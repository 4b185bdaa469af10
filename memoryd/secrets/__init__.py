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

The patterns and their substring hints are in ``patterns.py``, the rules that tell a credential
from prose in ``rules.py``, the normalised views of the text in ``views.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from memoryd.lazy import LazyPattern
from memoryd.secrets.patterns import Finding, SecretKind
from memoryd.secrets.rules import candidates
from memoryd.secrets.views import decode_base64, joined_lines, normalised

__all__ = ["REDACTED", "Finding", "SecretKind", "SecretScan", "SecretsMode", "find_secrets", "scan", "screen"]

SecretsMode = Literal["refuse", "redact"]
REDACTED = "[redacted]"
#: A run long enough to be a base64-wrapped secret (a short one holds too little to matter).
_BASE64_RUN = LazyPattern(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")


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
    view = normalised(text)
    findings = [view.original(f) for f in candidates(view.text)]
    joined = joined_lines(view)
    if joined is not None:
        findings.extend(view.original(joined.original(f)) for f in candidates(joined.text))
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


def _base64_wrapped(text: str) -> Iterator[Finding]:
    """Long base64 runs whose decoded text holds a secret: the whole run is that secret."""
    if len(text) < 24:
        return
    for match in _BASE64_RUN.finditer(text):
        run = match.group()
        decoded = decode_base64(run)
        if decoded is None:
            continue
        inner = find_secrets(decoded) if len(decoded) < 8192 else []
        if inner:
            yield Finding(inner[0].kind, match.start(), match.end())


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
