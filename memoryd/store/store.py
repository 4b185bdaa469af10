"""``Store``: the async façade over the memory database.

Each public coroutine hands one small synchronous function (from ``memories``, ``search``,
``vectors``, ``jobs``) to the writer or to a reader in a worker thread; nothing blocks the
trio event loop.  The synchronous methods are for start-up and the CLI.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import numpy.typing as npt

from memoryd.errors import InvalidParams
from memoryd.ids import now_ms
from memoryd.store import jobs, lifecycle, memories, schema, search, vectors
from memoryd.store.access import AccessLog
from memoryd.store.access import apply as apply_access
from memoryd.store.db import MMAP_BYTES, Database
from memoryd.store.lifecycle import EvictionReport, GcReport
from memoryd.store.records import EmbedJob, MemoryRecord, NewMemory, Scope, SearchHit
from memoryd.store.vectors import VectorSpace

log = logging.getLogger("memoryd.store")


def _check_new(new: NewMemory) -> None:
    if not new.content.strip():
        raise InvalidParams.for_field("content", "must not be empty")
    if new.shared and new.chat_id is None:
        raise InvalidParams.for_field("chat_id", "is required for a shared (group) memory")
    for field, value in (("content", new.content), ("owner", new.owner), ("source", new.source)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidParams.for_field(field, "is not valid Unicode text") from None


def _check_scope(scope: Scope) -> None:
    if not scope.user_id:
        raise InvalidParams.for_field("user_id", "must not be empty")


class Store:
    """The memory database: one file, one writer, a pool of readers."""

    def __init__(
        self, path: Path, *, readers: int = 4, busy_timeout_ms: int = 5000, mmap_bytes: int = MMAP_BYTES
    ) -> None:
        """``mmap_bytes`` = 0 reads through SQLite's bounded page cache instead of mapping the
        file: slower searches, but a full scan (the admin commands) keeps a small RSS."""
        self.path = Path(path)
        self._db = Database(self.path, readers=readers, busy_timeout_ms=busy_timeout_ms, mmap_bytes=mmap_bytes)
        try:
            version = self._db.plain_sync(schema.migrate)
            self._db.open_readers()
        except BaseException:
            self._db.close()
            raise
        self._rng = random.Random()
        # The vector space this process configured: query vectors come from its embedder.
        # Until configure_vector_space succeeds, search is keyword-only.
        self._space: VectorSpace | None = None
        # Hits of search and list, written in batches by flush_access (never on the search path).
        self._access = AccessLog()
        log.info("store opened: %s (schema v%d, %d readers)", self.path, version, readers)

    # -- memories --------------------------------------------------------------------------------

    async def add(self, new: NewMemory) -> tuple[MemoryRecord, bool]:
        """Insert ``new``; an identical live memory in the same scope is returned instead
        (second value True)."""
        _check_new(new)
        return await self._db.write(memories.add, new, now_ms())

    async def list(
        self,
        scope: Scope,
        *,
        limit: int,
        offset: int = 0,
        before_id: str | None = None,
        include_expired: bool = False,
    ) -> builtins.list[MemoryRecord]:
        """The caller's memories, newest first; ``before_id`` continues after a page."""
        _check_scope(scope)
        if offset < 0:
            raise InvalidParams.for_field("offset", "must be >= 0")
        cursor = memories.check_id_prefix(before_id, "before_id") if before_id is not None else None
        records = await self._db.read(
            memories.list_visible,
            scope,
            limit=limit,
            offset=offset,
            before_id=cursor,
            include_expired=include_expired,
            now_ms=now_ms(),
        )
        self._access.note((record.id for record in records), now_ms())
        return records

    async def search(
        self, scope: Scope, query: str, *, limit: int, query_vector: npt.ArrayLike | None
    ) -> builtins.list[SearchHit]:
        """Hybrid keyword + vector search within the caller's scope, best first.

        ``query_vector`` must come from the embedder passed to ``configure_vector_space``; before
        that succeeded (or with a vector of the wrong length) the search is keyword-only.
        """
        _check_scope(scope)
        vector = None if query_vector is None else np.asarray(query_vector, dtype=np.float32)
        hits = await self._db.read(
            search.search, scope, query, limit=limit, query_vector=vector, vector_space=self._space, now_ms=now_ms()
        )
        self._access.note((hit.id for hit in hits), now_ms())
        return hits

    async def delete(self, scope: Scope, memory_id: str) -> str | None:
        """Soft-delete by full id or unique prefix among the caller's visible memories."""
        _check_scope(scope)
        memories.check_id_prefix(memory_id)
        return await self._db.write(memories.delete, scope, memory_id, now_ms())

    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord | None:
        """One visible, unexpired memory by full id or unique prefix, or None."""
        _check_scope(scope)
        memories.check_id_prefix(memory_id)
        record = await self._db.read(memories.get_visible, scope, memory_id, now_ms())
        if record is not None:
            self._access.note([record.id], now_ms())
        return record

    async def short_ids(self, scope: Scope, ids: Iterable[str]) -> dict[str, str]:
        _check_scope(scope)
        return await self._db.read(memories.short_ids, scope, list(ids))

    # -- vector space --------------------------------------------------------------------------

    def configure_vector_space(self, model: str, dim: int) -> None:
        """Record (first time), accept (same) or refuse (different, unless a reindex to exactly
        this model was requested: then a new generation starts and every memory is re-queued)."""

        def configure(db: apsw.Connection) -> tuple[VectorSpace, bool, int]:
            space, started = vectors.configure(db, model, dim)
            queued = jobs.enqueue_missing(db, space, now_ms(), reset=True) if started else 0
            return space, started, queued

        space, started, queued = self._db.write_sync(configure)
        self._space = space
        if started:
            log.info(
                "vector space generation %d: %s dim %d (%d embed jobs queued)",
                space.generation,
                space.model,
                space.dim,
                queued,
            )

    def request_reindex(self, model: str, dim: int | None = None) -> None:
        """Allow the next ``configure_vector_space(model, dim)`` to replace the vector space."""
        self._db.write_sync(vectors.request_reindex, model, dim)

    def vector_space(self) -> VectorSpace | None:
        """The current (model, dim, generation), or None before an embedder was configured."""
        return self._db.write_sync(vectors.read_space)

    def enqueue_missing_embeddings(self) -> int:
        """Start-up: release leases of a previous run and queue an embed job for every live
        memory without a vector in the current space. Returns how many were queued."""

        def enqueue(db: apsw.Connection) -> int:
            jobs.clear_leases(db)
            space = vectors.read_space(db)
            return 0 if space is None else jobs.enqueue_missing(db, space, now_ms())

        return self._db.write_sync(enqueue)

    # -- jobs ----------------------------------------------------------------------------------

    async def claim_embed_jobs(self, limit: int) -> builtins.list[EmbedJob]:
        return await self._db.write(jobs.claim_embed, limit, now_ms())

    async def complete_embed_jobs(self, results: Sequence[tuple[EmbedJob, npt.ArrayLike]]) -> None:
        if results:
            await self._db.write(jobs.complete_embed, list(results), now_ms())

    async def fail_jobs(self, failed: Sequence[EmbedJob], error: str) -> None:
        if failed:
            await self._db.write(jobs.fail, list(failed), error, now_ms(), self._rng)

    async def next_job_due_ms(self, kind: str = jobs.EMBED) -> int | None:
        return await self._db.read(jobs.next_due_ms, kind)

    async def backlog(self) -> dict[str, int]:
        return await self._db.read(jobs.backlog)

    # -- lifecycle (synchronous: the daemon runs these in a worker thread, the CLI directly) ----

    @property
    def database(self) -> Database:
        """The connections, for host-side tools (``memoryd.admin``) that run one synchronous
        function per transaction: ``read_sync`` (a snapshot) or ``write_sync``."""
        return self._db

    async def flush_access(self) -> int:
        """Write the access counts gathered since the last flush in one transaction."""
        entries = self._access.drain()
        if entries:
            try:
                await self._db.write(apply_access, entries)
            except BaseException:
                self._access.restore(entries)
                raise
        return len(entries)

    def mark_expired(self) -> int:
        """Audit 'expired' once for every memory whose expiry passed."""
        return lifecycle.mark_expired(self._db, now_ms())

    def gc(self, *, retention_ms: int, dry_run: bool = False) -> GcReport:
        """Hard-remove memories deleted or expired more than ``retention_ms`` ago."""
        return lifecycle.gc(self._db, retention_ms=retention_ms, now_ms=now_ms(), dry_run=dry_run)

    def enforce_max_entries(self, *, per_user: int, per_chat: int, protect_recent_ms: int) -> EvictionReport:
        """Evict (soft-delete, audited) the lowest-value memories of over-full scopes."""
        return lifecycle.enforce_max_entries(
            self._db, per_user=per_user, per_chat=per_chat, protect_recent_ms=protect_recent_ms, now_ms=now_ms()
        )

    def optimize(self) -> int:
        """Merge the FTS index (small steps) and refresh planner statistics."""
        return lifecycle.optimize(self._db)

    # -- maintenance ---------------------------------------------------------------------------

    @property
    def write_count(self) -> int:
        """How many write transactions this process has run (a cheap change stamp)."""
        return self._db.write_count

    async def health_counts(self) -> dict[str, Any]:
        counts: dict[str, Any] = await self._db.read(memories.health_counts, now_ms())
        counts["db_bytes"] = self._file_bytes()
        return counts

    def _file_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += os.path.getsize(f"{self.path}{suffix}")
        return total

    def checkpoint(self, mode: str = "TRUNCATE") -> tuple[int, int, int]:
        """Fold the WAL back into the database file (TRUNCATE also empties it).

        Returns SQLite's (busy, wal frames, frames checkpointed); busy = 1 means readers or a
        writer of another process kept it from finishing (it completes on a later checkpoint).
        """
        if mode not in ("PASSIVE", "FULL", "RESTART", "TRUNCATE"):
            raise ValueError(f"unknown checkpoint mode {mode}")
        row = self._db.plain_sync(lambda db: db.execute(f"PRAGMA wal_checkpoint({mode})").fetchone())
        return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)

    def close(self) -> None:
        if not self._db.closed:
            entries = self._access.drain()
            if entries:
                try:
                    self._db.write_sync(apply_access, entries)
                except Exception:  # best-effort statistics must not stop a shutdown
                    log.warning("store: could not write %d access counts on close", len(entries), exc_info=True)
            self._db.close()
            log.info("store closed: %s", self.path)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
