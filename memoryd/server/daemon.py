"""The daemon: open the store, start the embedder and workers, then publish the socket.

Order matters: the socket file appears only once everything behind it is ready, and on the
way out the socket goes first, then in-flight calls finish, then the WAL is checkpointed.
A bad data directory or a damaged store stops start-up with one ``StartupError`` whose
``exit_status`` says which (``data_dir.py``, ``integrity.py``).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import threadpoolctl
import trio

from memoryd import __version__
from memoryd.auth import Authenticator
from memoryd.config import Config
from memoryd.embed import CoalescingEmbedder, Embedder
from memoryd.errors import EmbeddingModelMismatch, StartupError, StoreError, StoreRefused
from memoryd.ids import DAY_MS
from memoryd.lazy import LazyPattern
from memoryd.llm.factory import make_llm
from memoryd.log import fields
from memoryd.server import data_dir
from memoryd.server.activation import bound_name
from memoryd.server.head_start import HeadStart
from memoryd.server.heap_trim import HeapTrimmer
from memoryd.server.listener import RpcServer
from memoryd.server.notify import Notifier
from memoryd.server.pausing import despite_storage_faults
from memoryd.server.socketfile import bind_socket_file, remove_socket_file, socket_file_identity
from memoryd.server.wiring import build_services
from memoryd.service.extraction import ExtractionWorker
from memoryd.service.maintenance import Maintenance
from memoryd.service.methods import WAITS_FOR_LLM
from memoryd.service.summary import SummaryService
from memoryd.store import backends
from memoryd.store.erasure_log import GROUP_ERASED, everyone
from memoryd.store.interfaces import Backend, StartupCheck

if TYPE_CHECKING:
    from memoryd.llm import LlmClient

log = logging.getLogger("memoryd.daemon")


def single_threaded_blas() -> None:
    """numpy's BLAS on one thread, unless ``OPENBLAS_NUM_THREADS`` says otherwise (the operator
    decided).  A search's rescoring (64 rows x 384 at least) crosses OpenBLAS's size for
    splitting a matrix-vector product over threads, and OpenBLAS threads meet at a barrier
    after each product and spin while they wait: when any other process wants a core, the one
    descheduled stalls the rest (measured on 2 cores with one busy loop beside it: 7 ms of
    matrix products took 500 ms).  Searches already run on several reader threads."""
    if not os.environ.get("OPENBLAS_NUM_THREADS"):
        threadpoolctl.threadpool_limits(1, user_api="blas")


class Daemon:
    """A running memoryd; ``await nursery.start(daemon.run)`` returns once the socket is ready."""

    def __init__(
        self,
        config: Config,
        *,
        embedder: Embedder | None = None,
        listen_socket: socket.socket | None = None,
        notifier: Notifier | None = None,
        accept_empty_db: bool = False,
        head_start: HeadStart | None = None,
    ) -> None:
        """``embedder`` overrides the configured one (tests share one loaded model).

        ``listen_socket`` is a socket-activated one (systemd owns its file); ``notifier`` tells
        the service manager about readiness and status.  ``accept_empty_db`` serves a
        zero-length database file even where other files suggest it was truncated.
        ``head_start`` was begun for this daemon before its modules were imported (``cli``);
        without one, ``run`` begins its own.
        """
        self.config = config
        # Built first: a missing or too short token secret stops start-up before anything opens.
        self.authenticator = Authenticator.from_config(config.auth)
        self.extraction: ExtractionWorker | None = None
        self.server: RpcServer | None = None
        self.store: Backend | None = None
        self.maintenance: Maintenance | None = None
        self.summaries: SummaryService | None = None
        self.embedder: Embedder | None = embedder
        self._owns_embedder = embedder is None
        # Writes the summaries and runs extraction; None with [llm] provider = "none".  Built
        # here so a bad [llm] setting stops start-up (no network I/O: a down server is the
        # workers' problem).
        self.llm: LlmClient | None = make_llm(config.llm)
        self._listen_socket = listen_socket
        self.notifier = notifier or Notifier(None)
        self._accept_empty_db = accept_empty_db
        self._head_start = head_start
        self._stop = trio.Event()

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self, *, task_status: trio.TaskStatus[Path] = trio.TASK_STATUS_IGNORED) -> None:
        started = trio.current_time()
        head = self._head_start or HeadStart(self.config, embedder=self.embedder)
        integrity = head.integrity
        try:
            store = await trio.to_thread.run_sync(self._open_store)
        except BaseException:
            head.stop()
            raise
        self.store = store
        # Begins the check now if the file could not be read before; damage found at any time
        # stops the store's writes.
        integrity.store_opened(store.maintenance.mark_damaged)
        try:
            embedder = await self._start_embedder(store, head)
            try:
                await self._await_integrity(integrity)
                await trio.to_thread.run_sync(self._record_caps, store)
                await self._serve(store, embedder, started, task_status)
            finally:
                if self.llm is not None:
                    with trio.CancelScope(shield=True):
                        await self.llm.aclose()
                if embedder is not None and self._owns_embedder:
                    with trio.CancelScope(shield=True):
                        await embedder.aclose()
        finally:
            with trio.CancelScope(shield=True):
                head.stop()
                await trio.to_thread.run_sync(integrity.join)
                await trio.to_thread.run_sync(_close_store, store)
            log.info("daemon.stopped")

    def _open_store(self) -> Backend:
        config = self.config
        backends.check_engine(config)
        single_threaded_blas()
        data_dir.prepare(config.data_path, config.db_path, accept_empty_db=self._accept_empty_db)
        backends.limit_cache_memory(config)
        try:
            return backends.open_store(config)
        except StoreError as exc:
            failure = data_dir.opening_failure(config.db_path, exc)
            if failure is None:
                raise StartupError(str(exc)) from None
            raise failure from None

    def _record_caps(self, store: Backend) -> None:
        """Every add holds max_entries from the first one on (not only after maintenance)."""
        lifecycle = self.config.lifecycle
        try:
            store.maintenance.set_caps(
                per_user=lifecycle.max_entries_per_user,
                per_chat=lifecycle.max_entries_per_chat,
                protect_recent_ms=int(lifecycle.protect_recent_days * DAY_MS),
            )
        except StoreError as exc:
            # A full disk or a damaged file: the store's condition reports it; maintenance retries.
            log.warning("store.caps_not_recorded", extra=fields(reason=str(exc)))

    async def _await_integrity(self, integrity: StartupCheck) -> None:
        wait = self.config.storage.integrity_check_wait
        await integrity.wait(wait)
        if integrity.damage_found_within(wait):
            problems = integrity.problems
            raise StoreRefused(
                f"{self.config.db_path} failed its integrity check ({problems}); {data_dir.RESTORE_ADVICE}"
            )
        if not integrity.finished:
            # Damage found later turns health degraded and stops writes (the store's condition).
            log.info("store.integrity_check_continues", extra=fields(after_ready=True))

    async def _start_embedder(self, store: Backend, head: HeadStart) -> Embedder | None:
        if self.embedder is not None:
            embedder = self.embedder
        elif head.embedder_error is not None:
            raise head.embedder_error
        elif head.embedder is None:
            return None  # embedder = "none"
        else:
            embedder = head.embedder  # the local model is loading since the head start
        await embedder.start()
        try:
            if embedder.dim is not None:
                assert embedder.model_id is not None
                await trio.to_thread.run_sync(store.configure_vector_space, embedder.model_id, embedder.dim)
            elif embedder.model_id is not None:
                # An HTTP backend learns its dimension from its first reply, which may come much
                # later: another model's name is refused now, not after start-up.
                await trio.to_thread.run_sync(store.check_vector_model, embedder.model_id)
        except EmbeddingModelMismatch as exc:
            if self._owns_embedder:
                await embedder.aclose()
            raise StartupError(str(exc)) from None
        self.embedder = embedder
        # Concurrent searches' query embeddings and the backfill share one backend call.
        return CoalescingEmbedder(embedder, max_batch=self.config.embed.batch_size)

    async def _serve(
        self,
        store: Backend,
        embedder: Embedder | None,
        started: float,
        task_status: trio.TaskStatus[Path],
    ) -> None:
        config = self.config
        services = build_services(config, store, embedder, self.llm, self.authenticator, self._server_stats_json)
        self.summaries, self.extraction = services.summaries, services.extraction
        coalescer = embedder if isinstance(embedder, CoalescingEmbedder) else None
        server = RpcServer(services.table, config.limits, config.auth.trusted_uids, _llm_deadlines(config, self.llm))
        self.server = server
        identity: tuple[int, int] | None = None
        if self._listen_socket is not None:
            # Socket-activated: systemd owns the file, its mode and group; never touch them.
            listen_socket = self._listen_socket
            path = Path(bound_name(listen_socket))
        else:
            path = config.socket_path
            listen_socket = bind_socket_file(path, mode=config.socket_mode_bits, group=config.socket_group)
            identity = socket_file_identity(path)
        try:
            async with trio.open_nursery() as nursery:
                if coalescer is not None:
                    await nursery.start(coalescer.run)
                if services.backfill is not None:
                    await nursery.start(despite_storage_faults, services.backfill.run)
                if self.extraction is not None:
                    await nursery.start(despite_storage_faults, self.extraction.run)
                await nursery.start(services.summaries.run)
                # A full disk or a damaged file pauses it like the backfill.
                await nursery.start(despite_storage_faults, services.supersession_worker.run)
                # A store shared with other daemons (PostgreSQL) tells when one of them queued
                # work, so these workers need not wait for their next poll.
                listen_for_work = getattr(store, "listen_for_work", None)
                if listen_for_work is not None:
                    await nursery.start(
                        listen_for_work,
                        functools.partial(_wake, services, self.extraction),
                        functools.partial(_changed_elsewhere, services),
                    )
                # Expiry, gc, max_entries (a pass now, then on a timer) and access-count flushes.
                self.maintenance = Maintenance(
                    store.maintenance, config.lifecycle, conversations=store.conversations, extraction=config.extraction,
                    episodes=config.episodes,
                )  # fmt: skip
                await nursery.start(self.maintenance.run)
                trimmer = HeapTrimmer(lambda: (server.guard.requests_total, store.memories.write_count))
                await nursery.start(trimmer.run)
                # READY=1 before the first accept: a client that has been answered must find
                # the unit active (clients that come meanwhile wait in the listen queue).
                await self.notifier.ready(lambda: self._describe(store))
                await nursery.start(server.serve, listen_socket)
                log.info(
                    "daemon.ready",
                    extra=fields(
                        version=__version__,
                        socket=str(path),
                        embedder=config.embedder,
                        llm=config.llm.provider,
                        auth=config.auth.mode,
                        startup_ms=round((trio.current_time() - started) * 1000),
                    ),
                )
                task_status.started(path)
                nursery.start_soon(self.notifier.run_status, lambda: self._describe(store))
                # The knowledge rules' and the secrets filter's patterns, left out of start-up
                # (~40 ms): compiled now, beside the first requests, not within one.
                nursery.start_soon(trio.to_thread.run_sync, LazyPattern.compile_waiting)
                await self._stop.wait()
                log.info("daemon.stopping")
                await self.notifier.stopping()
                # The socket file goes first, so new clients fail fast instead of hanging.
                if identity is not None:
                    remove_socket_file(path, identity)
                server.shutdown()
                await server.stopped.wait()
                nursery.cancel_scope.cancel()
        finally:
            if identity is not None:
                remove_socket_file(path, identity)
            listen_socket.close()

    def _server_stats(self) -> dict[str, Any]:
        return self.server.stats() if self.server is not None else {}

    def _server_stats_json(self) -> bytes:
        return self.server.stats_json() if self.server is not None else b"{}"

    async def _describe(self, store: Backend) -> str:
        """The STATUS= line an operator sees in ``systemctl status memoryd``."""
        storage = store.memories.storage
        if storage.state != "ok":
            return f"degraded: {storage.reason}"
        counts = await store.memories.health_counts()
        pending = sum((await store.jobs.backlog()).values())
        connections = self._server_stats().get("connections_open", 0)
        return (
            f"serving; memories {counts['memories_active']}, users {counts['users']}, "
            f"jobs pending {pending}, connections {connections}"
        )


def _close_store(store: Backend) -> None:
    try:
        store.maintenance.maintain(release_space=True)
    except StoreError as exc:
        # Every committed write is already in the WAL file, which outlives this process (the
        # same guarantee as any commit under synchronous=NORMAL); SQLite folds it into the
        # database file on the next open or checkpoint.  Nothing is lost: exit normally.
        log.warning(
            "daemon.checkpoint_failed: the WAL is kept and is durable; it is folded in at the next start",
            extra=fields(error=str(exc)),
        )
    store.close()


def _llm_deadlines(config: Config, llm: LlmClient | None) -> dict[str, float]:
    """The extract methods ask the LLM while their caller waits: they get its longest call
    (llm.timeout per attempt, llm.retries, the waits between) on top of limits.request_timeout,
    so a model that answers within llm.timeout is never cut off by the request deadline."""
    if llm is None:
        return {}
    return dict.fromkeys(WAITS_FOR_LLM, config.limits.request_timeout + llm.longest_call())


def _wake(services: Any, extraction: ExtractionWorker | None) -> None:
    """Another daemon queued work: the workers look for it now."""
    if services.backfill is not None:
        services.backfill.notify()
    if extraction is not None:
        extraction.notify()
    services.supersession_worker.notify()


def _changed_elsewhere(services: Any, keys: set[str]) -> None:
    """Another daemon changed memories under these scope keys, or an owner's people
    (``people:<owner>``), or a process erased a user (``erased:<user>``: `memoryd forget-user`
    or memory.forget_all) and maybe their group memories (``erased-group``), or ``*``: changes may
    have been missed (the store's listening connection was lost): the caches built from them are
    out of date."""
    for key in keys:
        if key == "*":
            services.summaries.forget_erased(everyone)
            if services.people is not None:
                services.people.forget_erased(everyone)
        elif key == GROUP_ERASED:
            services.summaries.forget_group_chats()
        elif key.startswith("erased:"):
            services.summaries.forget_user(key.removeprefix("erased:"))
            if services.people is not None:
                services.people.forget_directory(key.removeprefix("erased:"))
        elif key.startswith("people:"):
            if services.people is not None:
                services.people.forget_directory(key.removeprefix("people:"))
        else:
            services.summaries.note_changed_key(key)
