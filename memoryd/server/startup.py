"""The store's side of start-up and shutdown: open it, check it, start the embedder against it,
and checkpoint and close it on the way out.

Each step turns a failure into one ``StartupError`` whose ``exit_status`` says which
(``data_dir.py`` for the disk, ``integrity.py`` for a damaged file); ``daemon.py`` decides the
order the steps run in.
"""

from __future__ import annotations

import logging
import os

import threadpoolctl
import trio

from memoryd.config import Config
from memoryd.embed import Embedder
from memoryd.errors import EmbeddingModelMismatch, StartupError, StoreError, StoreRefused
from memoryd.ids import DAY_MS
from memoryd.log import fields
from memoryd.server import data_dir
from memoryd.server.head_start import HeadStart
from memoryd.store import backends
from memoryd.store.interfaces import Backend, StartupCheck

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


def open_store(config: Config, *, accept_empty_db: bool) -> Backend:
    """The configured store, opened in a prepared data directory (blocking: run in a thread)."""
    backends.check_engine(config)
    single_threaded_blas()
    data_dir.prepare(config.data_path, config.db_path, accept_empty_db=accept_empty_db)
    backends.limit_cache_memory(config)
    try:
        return backends.open_store(config)
    except StoreError as exc:
        failure = data_dir.opening_failure(config.db_path, exc)
        if failure is None:
            raise StartupError(str(exc)) from None
        raise failure from None


def record_caps(config: Config, store: Backend) -> None:
    """Every add holds max_entries from the first one on (not only after maintenance)."""
    lifecycle = config.lifecycle
    try:
        store.maintenance.set_caps(
            per_user=lifecycle.max_entries_per_user,
            per_chat=lifecycle.max_entries_per_chat,
            protect_recent_ms=int(lifecycle.protect_recent_days * DAY_MS),
        )
    except StoreError as exc:
        # A full disk or a damaged file: the store's condition reports it; maintenance retries.
        log.warning("store.caps_not_recorded", extra=fields(reason=str(exc)))


async def await_integrity(config: Config, integrity: StartupCheck) -> None:
    """Wait up to ``storage.integrity_check_wait`` for the start-up check; damage found by then
    refuses the store."""
    wait = config.storage.integrity_check_wait
    await integrity.wait(wait)
    if integrity.damage_found_within(wait):
        problems = integrity.problems
        raise StoreRefused(f"{config.db_path} failed its integrity check ({problems}); {data_dir.RESTORE_ADVICE}")
    if not integrity.finished:
        # Damage found later turns health degraded and stops writes (the store's condition).
        log.info("store.integrity_check_continues", extra=fields(after_ready=True))


async def start_embedder(store: Backend, head: HeadStart, given: Embedder | None, *, owned: bool) -> Embedder | None:
    """The embedder (``given``, else the one the head start is loading) started, its model
    checked against the store's vectors; None with ``embedder = "none"``.  ``owned``: closed
    here when the store refuses its model."""
    if given is not None:
        embedder = given
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
        if owned:
            await embedder.aclose()
        raise StartupError(str(exc)) from None
    return embedder


def close_store(store: Backend) -> None:
    """Checkpoint the WAL and close the store (blocking: run in a thread)."""
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
