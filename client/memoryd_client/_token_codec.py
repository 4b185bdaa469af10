"""A context token's bytes: unpadded base64url segments and the flat JSON objects inside them.

Both directions are byte-for-byte what ash does, so a token minted by either side verifies on
the other; decoding refuses deep nesting before the JSON parser sees it.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Dict

#: A token's header and claims are flat objects; deeper JSON is refused before it is decoded
#: (the json module recurses per level: 6 KB of brackets would raise RecursionError).
MAX_JSON_DEPTH = 4


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


#: An unpadded base64url segment, nothing else (checked before decoding).
_SEGMENT = re.compile(r"[A-Za-z0-9_-]*\Z")


def b64url_decode(text: str, *, strict: bool = True) -> bytes:
    # Strict for token segments: only the base64url alphabet, no padding (what both sides
    # emit).  Lenient for secrets, where ash accepts whatever urlsafe_b64decode accepts.
    if strict and not _SEGMENT.match(text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode((text + "=" * (-len(text) % 4)).encode("ascii"))


def json_segment(value: Dict[str, Any]) -> str:
    # Byte-for-byte what ash signs: compact separators, sorted keys, ASCII escapes.
    return b64url_encode(json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8"))


def json_object(data: bytes) -> Any:
    """``json.loads`` after checking the nesting is shallow (ValueError when it is not)."""
    text = data.decode("utf-8")
    if text.count("{") + text.count("[") > MAX_JSON_DEPTH and _nesting_depth(text) > MAX_JSON_DEPTH:
        raise ValueError("nested too deeply")
    return json.loads(text)


def _nesting_depth(text: str) -> int:
    """How deep objects and arrays nest in JSON ``text`` (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
