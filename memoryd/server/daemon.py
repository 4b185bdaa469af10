"""The daemon: open the store, start the embedder and workers, then publish the socket.

Order matters: the socket file appears only once everything behind it is ready, and on the
way out the socket goes first, then in-flight calls finish, then the WAL is checkpointed.
A bad data directory or a damaged store stops start-up with one ``StartupError`` whose
``exit_status`` says which (``data_dir.py``, ``integrity.py``).  The store's steps are
``startup.py``'s, the background tasks ``workers.py``'s; this module only orders them.
"""

from __future__ import annotations

import functools
import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from memoryd import __version__
from memoryd.auth import Authenticator
from memoryd.config import Config
from memoryd.embed import CoalescingEmbedder, Embedder
from memoryd.lazy import LazyPattern
from memoryd.llm.factory import make_llm
from memoryd.log import fields
from memoryd.server.activation import bound_name
from memoryd.server.head_start import HeadStart
from memoryd.server.listener import RpcServer
from memoryd.server.notify import Notifier
from memoryd.server.socketfile import bind_socket_file, remove_socket_file, socket_file_identity
from memoryd.server.startup import await_integrity, close_store, open_store, record_caps, start_embedder
from memoryd.server.wiring import build_services
from memoryd.server.workers import start_workers
from memoryd.service.extraction import ExtractionWorker
from memoryd.service.maintenance import Maintenance
from memoryd.service.methods import WAITS_FOR_LLM
from memoryd.service.summary import SummaryService
from memoryd.store.interfaces import Backend

if TYPE_CHECKING:
    from memoryd.llm import LlmClient

log = logging.getLogger("memoryd.daemon")


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
            store = await trio.to_thread.run_sync(
                functools.partial(open_store, self.config, accept_empty_db=self._accept_empty_db)
            )
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
                await await_integrity(self.config, integrity)
                await trio.to_thread.run_sync(record_caps, self.config, store)
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
                await trio.to_thread.run_sync(close_store, store)
            log.info("daemon.stopped")

    async def _start_embedder(self, store: Backend, head: HeadStart) -> Embedder | None:
        embedder = await start_embedder(store, head, self.embedder, owned=self._owns_embedder)
        if embedder is None:
            return None
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
                self.maintenance = await start_workers(
                    nursery, config, store, services, coalescer, lambda: server.guard.requests_total
                )
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
                # A call or a worker waiting for a database that cannot be reached fails now
                # (retryable) instead of holding the stop up for the pool's timeout.
                await trio.to_thread.run_sync(store.stopping)
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


def _llm_deadlines(config: Config, llm: LlmClient | None) -> dict[str, float]:
    """The extract methods ask the LLM while their caller waits: they get its longest call
    (llm.timeout per attempt, llm.retries, the waits between) on top of limits.request_timeout,
    so a model that answers within llm.timeout is never cut off by the request deadline."""
    if llm is None:
        return {}
    return dict.fromkeys(WAITS_FOR_LLM, config.limits.request_timeout + llm.longest_call())
