"""The one rule for identifiers: user ids, chat ids and a context token's ``sub`` and ``chat_id``.

An identifier names a person or a chat, and two that look the same on a screen must be the same
identifier.  So an identifier is refused, never rewritten, when it

* is empty or longer than :data:`MAX_IDENTIFIER_CHARS` characters;
* starts or ends with a space (``"alice "`` would otherwise be a second alice);
* holds a character that is not printable (control characters such as NUL, tab, newline or ESC,
  format characters such as the zero-width space, U+200B, or the BOM, any space other than the
  plain ASCII space, such as the no-break space U+00A0 or U+3000, private-use and unassigned
  code points, lone surrogates) or a character that prints as nothing (Hangul fillers, the
  braille blank, combining grapheme joiner, variation selectors);
* is not in Unicode normalization form NFC (``"é"`` typed as ``e`` + a combining accent).

The daemon applies it in trust and token mode alike, the client and the sandbox CLI before they
send anything, and token minting before it signs.  Standard library only.
"""

from __future__ import annotations

import unicodedata
from typing import Optional

#: The longest identifier, in characters (the same in every mode and on every path).
MAX_IDENTIFIER_CHARS = 256

#: Printable by Python's definition, yet they show as nothing.
_BLANK_LOOKING = frozenset(
    "\u115f\u1160\u3164\uffa0\u2800\u034f\u17b4\u17b5"
    + "".join(chr(c) for c in range(0xFE00, 0xFE10))
    + "".join(chr(c) for c in range(0xE0100, 0xE01F0))
)


def identifier_problem(value: object) -> Optional[str]:
    """Why ``value`` is not an acceptable identifier (a short phrase), or None when it is."""
    if not isinstance(value, str):
        return "must be a string"
    if not value:
        return "must not be empty"
    if len(value) > MAX_IDENTIFIER_CHARS:
        return f"must be at most {MAX_IDENTIFIER_CHARS} characters (got {len(value)})"
    if not value.strip(" "):
        return "must not be blank"
    if value != value.strip(" "):
        return "must not start or end with a space"
    for char in value:
        if "\ud800" <= char <= "\udfff":
            return "must be valid Unicode (it has a lone surrogate)"
        if not char.isprintable() or char in _BLANK_LOOKING:
            return f"must not contain control, invisible or non-ASCII space characters (U+{ord(char):04X})"
    if not unicodedata.is_normalized("NFC", value):
        return "must be in Unicode normalization form NFC"
    return None


def check_identifier(field: str, value: str) -> str:
    """``value`` unchanged when it is an acceptable identifier; else ValueError naming ``field``."""
    problem = identifier_problem(value)
    if problem is not None:
        raise ValueError(f"{field} {problem}")
    return value
