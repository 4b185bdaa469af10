"""The ``meta`` table: small named values of the store (vector space, reindex request, the last
maintenance run), read and written here only."""

from __future__ import annotations

import functools

import apsw


def get(db: apsw.Connection, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def get_many(db: apsw.Connection, *keys: str) -> dict[str, str | None]:
    """The values of ``keys`` that are set (one indexed query: every search reads the space)."""
    return dict(db.execute(_select_many(len(keys)), keys))


@functools.cache
def _select_many(count: int) -> str:
    return f"SELECT key, value FROM meta WHERE key IN ({', '.join('?' * count)})"


def put(db: apsw.Connection, key: str, value: str | None) -> None:
    db.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def remove(db: apsw.Connection, *keys: str) -> None:
    db.execute(f"DELETE FROM meta WHERE key IN ({', '.join('?' * len(keys))})", keys)
