"""The sqlite-vec versions memoryd runs with, checked once at start.

memoryd uses sqlite-vec's documented surface only: ``vec0`` tables with a partition key and
metadata columns, ``BIT[n]`` columns with ``vec_bit``, KNN queries with ``k = ?`` and a
``distance <= ?`` bound (``vectors/hamming_scan.py``).  Its copies of the vectors live in its own tables
(``vector_copies``).  The bound on ``distance`` is a late addition to 0.1.x and memoryd is
tested with 0.1.9, and 0.2 may change the surface; so the daemon refuses to start on a version
outside SUPPORTED rather than serve searches that fail or quietly rank otherwise.
"""

from __future__ import annotations

import re

import apsw

from memoryd.errors import UnsupportedSqliteVec
from memoryd.store.sqlite.db.connection import install_connection_hooks

Version = tuple[int, int, int]

#: Supported: from the first version up to, not including, the second (pyproject.toml pins the same).
SUPPORTED: tuple[Version, Version] = ((0, 1, 9), (0, 2, 0))

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def installed_version() -> str:
    """``vec_version()`` of the sqlite-vec every connection loads."""
    install_connection_hooks()
    db = apsw.Connection(":memory:")
    try:
        return str(db.execute("SELECT vec_version()").fetchone()[0])
    finally:
        db.close()


def _text(version: Version) -> str:
    return ".".join(str(part) for part in version)


def check(version: str | None = None) -> str:
    """Raise UnsupportedSqliteVec unless ``version`` (default: the installed one) is in
    SUPPORTED; returns it."""
    if version is None:
        version = installed_version()
    low, high = SUPPORTED
    parsed = _VERSION.match(version)
    found = tuple(int(part) for part in parsed.groups()) if parsed else None
    if found is None or not low <= found < high:
        raise UnsupportedSqliteVec(
            f"sqlite-vec {version} is installed, but this memoryd supports sqlite-vec {_text(low)} up to "
            f"(not including) {_text(high)}: install one of those (pip install 'sqlite-vec>={_text(low)},<{_text(high)}')"
        )
    return version
