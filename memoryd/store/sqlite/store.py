"""``Store``: the SQLite backend (``interfaces.Backend``); opens the memory database once and hands
each kind of caller its own object.

    store.memories   MemoryRepository  memory.* methods and system.health
    store.jobs       JobQueue          the backfill worker (and the next workers)
    store.lifecycle  Lifecycle         the maintenance task and the admin commands (also
                                       ``store.maintenance``, its interface's name)
    store.people     PeopleRepository  person.* methods, people learned on add, context
    store.supersession  Supersessions  adds that may replace older memories, their jobs, history
    store.conversations ConversationLog observe, the extract methods, the extraction worker

The container itself keeps what belongs to the store as a whole: the vector space this
process works in (start-up, `memoryd reindex`) and closing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import apsw

from memoryd.errors import DiskFull, StoreCorrupt, StoreError
from memoryd.ids import now_ms
from memoryd.store.maintenance_rules import log_generation_started
from memoryd.store.sqlite.admin.lifecycle import Lifecycle
from memoryd.store.sqlite.conversations.conversation_log import ConversationLog
from memoryd.store.sqlite.db.database import MMAP_BYTES, Database
from memoryd.store.sqlite.db.write_batch import WriteBatcher
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.jobs.job_queue import JobQueue
from memoryd.store.sqlite.memories.hits import HitCounter, write_hits
from memoryd.store.sqlite.memories.repository import MemoryRepository
from memoryd.store.sqlite.people.people_repository import PeopleRepository
from memoryd.store.sqlite.schema import ladder as schema
from memoryd.store.sqlite.search.overlap_gate import OVERLAP_FROM, OverlapGate
from memoryd.store.sqlite.supersession.supersession_repository import Supersessions
from memoryd.store.sqlite.vectors import vectors
from memoryd.store.sqlite.vectors.vectors import VectorSpace
from memoryd.store.storage_state import Condition

log = logging.getLogger("memoryd.store")


class Store:
    """The memory database: one file, one writer, a pool of readers."""

    def __init__(
        self,
        path: Path,
        *,
        readers: int = 4,
        busy_timeout_ms: int = 5000,
        mmap_bytes: int = MMAP_BYTES,
        clock: Callable[[], int] = now_ms,
        readonly: bool = False,
        overlap_from: int = OVERLAP_FROM,
    ) -> None:
        """``mmap_bytes`` = 0 reads through SQLite's bounded page cache instead of mapping the
        file: slower searches, but a full scan (the admin commands) keeps a small RSS.
        ``clock`` gives "now" in wall-clock ms (tests move it).  ``readonly`` never writes (nor
        migrates): for the admin commands that only read, on a read-only disk too.
        ``overlap_from``: scopes of at least this many live memories overlap a search's parts
        (``overlap_gate.py``; 0: every scope)."""
        self.path = Path(path)
        self._db = Database(
            self.path, readers=readers, busy_timeout_ms=busy_timeout_ms, mmap_bytes=mmap_bytes, readonly=readonly
        )
        try:
            version = self._db.plain_sync(_require_current if readonly else schema.migrate)
            self._db.open_readers()
        except BaseException:
            self._db.close()
            raise
        self._clock = clock
        # The vector space this process configured: query vectors come from its embedder.
        # Until configure_vector_space succeeds, search is keyword-only.
        self._space: VectorSpace | None = None
        # Hits of search, list and get: noted by the repository, written by the lifecycle.
        self._hits = HitCounter()
        self.memories = MemoryRepository(self._db, self._hits, clock, lambda: self._space, OverlapGate(overlap_from))
        self.jobs = JobQueue(self._db, clock)
        self.lifecycle = Lifecycle(self._db, self._hits, clock)
        #: The backend-neutral name of the same object (``interfaces.Maintenance``).
        self.maintenance = self.lifecycle
        self.people = PeopleRepository(self._db, clock)
        #: The small writes of concurrent calls (memory.add, memory.observe) commit together.
        self.small_writes = WriteBatcher(self._db)
        self.supersession = Supersessions(self._db, self._hits, clock, self.small_writes)
        self.conversations = ConversationLog(self._db, clock, self.small_writes)
        log.info("store opened: %s (schema v%d, %d readers)", self.path, version, readers)

    @property
    def condition(self) -> Condition:
        """Whether the store takes writes (ok, disk full, file damaged), and why not."""
        return self._db.condition.current

    @staticmethod
    def limit_cache_memory(limit_bytes: int) -> None:
        """Cap the memory SQLite holds in this process, every store's connections together
        (0: no cap); a process-wide setting, so the daemon sets it once.

        SQLite's soft heap limit: once its heap passes the cap, every connection's page cache
        recycles its own least recently used pages instead of growing; nothing fails (the hard
        limit would make allocations fail, so it is not used).  Without it each connection fills
        its own ``connection.CACHE_KIB``: 1 writer + 4 readers + the maintenance reader = 96 MiB
        at 100k memories, mostly copies of the same hot pages, which the OS page cache holds
        anyway.  Measured in-process, 100k memories, 4 concurrent searchers: SQLite's heap
        67 MiB uncapped, 32 MiB capped, CPU per hybrid search the same within the noise
        (14.1-14.9 vs 14.2-14.3 ms).
        """
        apsw.soft_heap_limit(max(0, limit_bytes))

    # -- the vector space (start-up and `memoryd reindex`) -------------------------------------

    def configure_vector_space(self, model: str, dim: int) -> None:
        """Record (first time), accept (same) or refuse (different, unless a reindex to exactly
        this model was requested: then a new generation starts and every memory is re-queued)."""
        now = self._clock()

        def configure(db: apsw.Connection) -> tuple[VectorSpace, bool, int]:
            space, started = vectors.configure(db, model, dim)
            queued = jobs.enqueue_missing(db, space, now, reset=True) if started else 0
            return space, started, queued

        space, started, queued = self._db.write_sync(configure)
        self._space = space
        if started:
            log_generation_started(space, queued)

    def request_reindex(self, model: str, dim: int | None = None) -> None:
        """Allow the next ``configure_vector_space(model, dim)`` to replace the vector space."""
        self._db.write_sync(vectors.request_reindex, model, dim)

    def check_vector_model(self, model: str) -> None:
        self._db.write_sync(vectors.check_model, model)

    def vector_space(self) -> VectorSpace | None:
        """The current (model, dim, generation), or None before an embedder was configured."""
        return self._db.write_sync(vectors.read_space)

    # -- closing -------------------------------------------------------------------------------

    def stopping(self) -> None:
        """Nothing to do: a file has no server to wait for."""

    def close(self) -> None:
        """Write the hit counts not flushed yet, then close every connection (idempotent)."""
        if not self._db.closed:
            entries = self._hits.drain()
            if entries:
                try:
                    self._db.write_sync(write_hits, entries)
                except (DiskFull, StoreCorrupt) as exc:  # logged once by the store's condition
                    log.warning("store: could not write %d hit counts on close: %s", len(entries), exc)
                except Exception:  # best-effort statistics must not stop a shutdown
                    log.warning("store: could not write %d hit counts on close", len(entries), exc_info=True)
            self._db.close()
            log.info("store closed: %s", self.path)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _require_current(db: apsw.Connection) -> int:
    """A read-only store cannot be migrated: it must already have this memoryd's schema."""
    version = schema.schema_version(db)
    if version != schema.LATEST:
        raise StoreError(
            f"the database has schema v{version} and this memoryd reads v{schema.LATEST}: "
            "open it once with write access (`memoryd serve`) to migrate it"
        )
    return version
