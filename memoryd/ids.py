"""Memory ids and timestamps.

A memory id is 26 Crockford base32 characters.  Sandbox tools (ash) show and delete by the first
8, so new ids are random from the first character on: 8 characters carry ~40 random bits, and
``memories.insert`` re-draws the rare id whose 8-character prefix is already taken, so a short
id names one memory.  Their first character is 8-Z, never 0-7 as in the time-ordered ULIDs of
older versions, so old and new ids never share a prefix.  Ids carry no order: lists sort by
``created_at_ms`` (then rowid).  Timestamps are integer milliseconds in the database and
ISO 8601 UTC on the wire.
"""

from __future__ import annotations

import calendar
import os
import re
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ID_LENGTH = 26
ULID_LENGTH = ID_LENGTH  # older ids (ULIDs) have the same length and alphabet
MIN_PREFIX_LENGTH = 8
DAY_MS = 86_400_000

#: A ULID's first character is 0-7 (128 bits in 26 characters); new ids start above.
_NEW_ID_LEADS = CROCKFORD[8:]

_lock = threading.Lock()
_last_ms = -1
_last_random = 0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_id() -> str:
    """A random memory id: 24 choices for the first character, 32 for each of the other 25
    (~129 bits).  Uniform in every prefix, so 8 characters tell ~10^12 ids apart."""
    raw = int.from_bytes(os.urandom(17), "big")
    lead = _NEW_ID_LEADS[raw % len(_NEW_ID_LEADS)]
    raw //= len(_NEW_ID_LEADS)
    return lead + "".join(CROCKFORD[(raw >> shift) & 31] for shift in range(120, -1, -5))


def new_ulid(at_ms: int | None = None) -> str:
    """A ULID (people ids; memory ids of older versions, which tests rebuild with it): a new ULID for ``at_ms`` (default now); monotonic within a process on the real clock.

    Ids made in the same millisecond (or while the clock steps back) bump the random part, so
    they still sort by creation.  A timestamp from the future (imports, tests) gets a plain
    random ULID and leaves the monotonic state alone, or every later id would inherit it.
    """
    global _last_ms, _last_random
    real_now = now_ms()
    ms = real_now if at_ms is None else at_ms
    with _lock:
        if ms > real_now + 1000:
            random_part = int.from_bytes(os.urandom(10), "big")
        else:
            if ms <= _last_ms and _last_ms - ms < 10_000:
                ms = _last_ms
                random_part = _last_random + 1
            else:
                random_part = int.from_bytes(os.urandom(10), "big")
            if ms >= _last_ms:
                _last_ms, _last_random = ms, random_part
    value = (ms << 80) | (random_part & ((1 << 80) - 1))
    return "".join(CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def normalize_id_prefix(text: str) -> str:
    """Upper-case, with Crockford's look-alikes mapped (I/L -> 1, O -> 0)."""
    return text.strip().upper().translate(str.maketrans("ILO", "110"))


def is_id_prefix(text: str) -> bool:
    return all(ch in CROCKFORD for ch in text)


def unique_prefix(memory_id: str, neighbours: Iterable[str | None]) -> str:
    """The shortest prefix of ``memory_id`` (at least MIN_PREFIX_LENGTH characters) that none of
    ``neighbours`` starts with.  Ids sort, so an id's two neighbours among the ids a caller sees
    are all it has to differ from (None: no neighbour on that side)."""
    longest = 0
    for neighbour in neighbours:
        if neighbour is not None:
            shared = next((n for n, (x, y) in enumerate(zip(memory_id, neighbour, strict=False)) if x != y), None)
            longest = max(longest, min(len(memory_id), len(neighbour)) if shared is None else shared)
    return memory_id[: max(MIN_PREFIX_LENGTH, longest + 1)]


def iso_from_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    stamp = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z")


def ms_from_iso(text: str) -> int:
    """Inverse of ``iso_from_ms`` (exactly that format: ``YYYY-MM-DDTHH:MM:SS.mmmZ``)."""
    match = _ISO.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a timestamp like 2025-01-02T03:04:05.678Z")
    year, month, day, hour, minute, second, millis = (int(part) for part in match.groups())
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1] and hour < 24 and minute < 60):
        raise ValueError(f"{text!r} is not a valid date and time")
    if second > 59:
        raise ValueError(f"{text!r} is not a valid date and time")
    return calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) * 1000 + millis
