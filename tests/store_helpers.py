"""What the store tests share: a movable clock, memories to add, vectors (and the int8 copies older
stores kept), the embed-all loop and SQL on the database file through a connection of the test's
own (the real file, no internals)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from memoryd.ids import now_ms
from memoryd.store import NewMemory, Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.db.database import open_connection


class Clock:
    """A store clock a test can stop: ``Store(path, clock=clock)``; ``clock.at = T`` holds it
    at T, ``clock.at = None`` lets it follow real time again."""

    def __init__(self, at: int | None = None) -> None:
        self.at = at

    def __call__(self) -> int:
        return now_ms() if self.at is None else self.at


def note(
    content: str,
    owner: str = "alice",
    *,
    chat_id: str | None = None,
    shared: bool = False,
    source: str = "t",
    **fields: Any,
) -> NewMemory:
    """A memory to add; ``shared=True`` makes it a group memory of ``chat_id``."""
    return NewMemory(content=content, owner=owner, chat_id=chat_id, shared=shared, source=source, **fields)


async def keyword_found(store: Store, query: str, owner: str = "alice") -> list[str]:
    """The contents a keyword-only search (no query vector) of ``owner``'s memories finds, best first."""
    hits = await store.memories.search(Scope(owner), query, limit=5)
    return [hit.content for hit in hits]


def unit(dim: int, *components: float) -> np.ndarray:
    """A unit vector of ``dim`` dimensions starting with ``components`` (default: the first axis)."""
    vector = np.zeros(dim, dtype=np.float32)
    vector[: len(components) or 1] = components or (1.0,)
    return vector / np.linalg.norm(vector)


def random_units(count: int, seed: int, dim: int = 384) -> np.ndarray:
    """``count`` random unit vectors (rows) of ``dim`` dimensions (MiniLM's by default), the same
    for the same ``seed``."""
    vectors = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def int8_copy(vector: np.ndarray) -> bytes:
    """The int8 rescoring copy stores of schemas m008-m011 kept: the vector scaled so its largest
    component is 127, written out here rather than taken from the code that reads it."""
    return np.rint(vector * 127 / np.abs(vector).max()).astype(np.int8).tobytes()


async def embed_all(
    store: Store,
    vector_for: Mapping[str, np.ndarray] | Callable[[str], np.ndarray],
    default: np.ndarray | None = None,
) -> int:
    """Run the real job path until no job is due: claim, complete with ``vector_for[content]``
    (or ``vector_for(content)``, or ``default``).  Returns how many were embedded."""
    done = 0
    while claimed := await store.jobs.claim_embed(10_000):
        if callable(vector_for):
            vectors = [vector_for(job.content) for job in claimed]
        else:
            vectors = [vector_for.get(job.content, default) for job in claimed]
        await store.jobs.complete_embed(list(zip(claimed, vectors, strict=True)))
        done += len(claimed)
    return done


def sql(path: Path, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``query`` on the database file in a connection of its own (sqlite-vec loaded).  It
    waits for a daemon's write lock as long as a loaded CI machine may make it hold it."""
    db = open_connection(path, busy_timeout_ms=30_000)
    try:
        with db:
            return [tuple(row) for row in db.execute(query, params)]
    finally:
        db.close()


@contextlib.contextmanager
def reading(path: Path, busy_timeout_ms: int = 30_000) -> Iterator[apsw.Connection]:
    """A read-only connection of the test's own on a database file (sqlite-vec loaded), closed
    on leaving.  It opens no transaction: ``with db:`` around what must read one snapshot."""
    db = open_connection(path, busy_timeout_ms=busy_timeout_ms, readonly=True)
    try:
        yield db
    finally:
        db.close()


def back_to_schema_12(path: Path, rescoring_copy: Callable[[int, bytes], bytes] = lambda rowid, fine: fine) -> None:
    """The store's vectors as schemas m007-m012 kept them, written out here rather than taken
    from the migrations: no ``vector_copies``, the rescoring copy (``rescoring_copy(rowid,
    6-bit copy)``) an auxiliary column of the vec0 table.  user_version is left to the caller."""
    rows = sql(
        path,
        "SELECT v.memory_rowid, v.scope_key, v.expires_at, v.disclosure, v.learned_chat, c.coarse, c.fine "
        "FROM vec_g1 AS v JOIN vector_copies AS c ON c.memory_rowid = v.memory_rowid",
    )
    bits = 8 * len(rows[0][5]) if rows else 8
    sql(path, "DROP TABLE vec_g1")
    sql(path, "DROP TABLE vector_copies")
    sql(path, "CREATE VIRTUAL TABLE vec_g1 USING vec0 (memory_rowid INTEGER PRIMARY KEY, scope_key TEXT PARTITION KEY, "
              f"expires_at INTEGER, disclosure INTEGER, learned_chat TEXT, coarse BIT[{bits}], +embedding BLOB, "
              "chunk_size = 512)")  # fmt: skip
    for rowid, scope_key, expires_at, disclosure, chat, coarse, fine in rows:
        sql(path, "INSERT INTO vec_g1 (memory_rowid, scope_key, expires_at, disclosure, learned_chat, coarse, embedding) "
                  "VALUES (?, ?, ?, ?, ?, vec_bit(?), ?)",
            (rowid, scope_key, expires_at, disclosure, chat, coarse, rescoring_copy(rowid, fine)))  # fmt: skip
