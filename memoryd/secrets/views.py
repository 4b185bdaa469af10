"""Normalised views of a text: the same text as a reader sees it (invisible characters removed,
look-alike letters folded, a key split over lines joined, base64 decoded), each character
mapped back to where it stands in the original, so a find in a view redacts the original."""

from __future__ import annotations

import base64
import binascii
import unicodedata
from dataclasses import dataclass

from memoryd.lazy import LazyPattern
from memoryd.secrets.patterns import Finding

_LINE_BREAK_IN_TOKEN = LazyPattern(r"(?<=\S)[\r\n]+(?=\S)")


@dataclass(frozen=True)
class View:
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
LOOKALIKES = dict(zip(
    "АВЕКМНОРСТХІЅЈаеорсухіѕјΑΒΕΖΗΙΚΜΝΟΡΤΥΧον",
    "ABEKMHOPCTXISJaeopcyxisjABEZHIKMNOPTYXov",
    strict=True,
))  # fmt: skip


def normalised(text: str) -> View:
    if text.isascii():
        return View(text, None)
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if unicodedata.category(char) == "Cf":
            continue  # zero-width space, joiners, soft hyphen, BOM: invisible, and split a key
        folded = char
        if ord(char) > 127:
            folded = unicodedata.normalize("NFKC", char)
            folded = LOOKALIKES.get(folded, folded)
        chars.append(folded)
        origin.extend([index] * len(folded))
    return View("".join(chars), origin)


def joined_lines(view: View) -> View | None:
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
    return View("".join(chars), origin)  # in view's coordinates: view.original maps on


def decode_base64(run: str) -> str | None:
    """The printable text ``run`` encodes (standard or URL-safe alphabet), else None."""
    padded = run + "=" * (-len(run) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(1 for char in decoded if char.isprintable() or char in "\n\r\t")
    return decoded if decoded and printable == len(decoded) else None
