"""Connections to PostgreSQL: a pool, each call one transaction on a worker thread.

psycopg's async API runs on asyncio only, so the store uses synchronous psycopg with
``psycopg_pool.ConnectionPool``, entered through ``trio.to_thread.run_sync`` with a
``CapacityLimiter`` sized to the pool (a thread never waits inside the pool for a connection).

Every connection disables server-side prepared statements (``prepare_threshold=None``) and runs
with ``plan_cache_mode = force_custom_plan``: a generic plan of a scoped KNN or keyword query
was measured 10-60x slower than the custom one, and the partial indexes need the parameters'
values to be usable.
"""

from __future__ import annotations

import functools
import logging
import random
import select
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import psycopg
import trio
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from memoryd.errors import StoreConflict, StoreError, StoreRefused, StoreUnreachable
from memoryd.store.connection_urls import redacted
from memoryd.store.postgres import notices
from memoryd.store.storage_state import OK, Condition

log = logging.getLogger("memoryd.store")

P = ParamSpec("P")
T = TypeVar("T")

#: How many times a transaction the server rolled back as a deadlock or a serialization
#: failure is run before the call fails with a retryable error.
CONFLICT_TRIES = 3
#: serialization_failure, deadlock_detected.
CONFLICTS = frozenset({"40001", "40P01"})


def password_from(password_file: str) -> str | None:
    if not password_file:
        return None
    try:
        return Path(password_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise StoreRefused(f"storage.password_file {password_file}: {exc.strerror or exc}") from None


class Database:
    """The pool, and how a call reaches it: ``run`` (async, in a transaction) or ``run_sync``."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 8,
        statement_timeout_ms: int = 30000,
        password: str | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.url = url
        self.backend = "postgres"
        try:
            parsed = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            # libpq quotes the part it could not read, which may be a piece of the password.
            raise StoreRefused(
                f"storage.url is not a libpq connection URL or keyword string: {redacted(str(exc).strip())} "
                f"({redacted(url)})"
            ) from None
        # The URL's own options (a search_path, say) are kept; ours follow them.
        given = parsed.get("options") or ""
        options = f"{given} -c plan_cache_mode=force_custom_plan".strip()
        if statement_timeout_ms:
            options += f" -c statement_timeout={int(statement_timeout_ms)}"
        kwargs: dict[str, Any] = {"prepare_threshold": None, "options": options, "autocommit": False}
        if password is not None:
            kwargs["password"] = password
        self._connect_kwargs = kwargs
        self._connect_timeout = connect_timeout_s
        self.pool_size = pool_size
        self._limiter = trio.CapacityLimiter(pool_size)
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs=kwargs,
            open=False,
            # A call waits this long for a connection (the server down: then it fails, retryable).
            timeout=min(connect_timeout_s, 5.0),
            # A connection the server dropped (restart, failover) is found and replaced before use.
            check=_check_connection,
            # The pool's own retries back off exponentially without a cap: after a long outage
            # they would wait minutes.  So each attempt gives up after a few seconds, and the
            # next call that needs a connection starts a fresh one (the daemon reconnects as
            # soon as the server is back).
            reconnect_timeout=5.0,
            name="memoryd",
            configure=_configure,
        )
        self.announcer = notices.Announcer(functools.partial(self.run_sync, notices.send_all, pipeline=True))
        self._closed = False
        self._lock = threading.Lock()
        self._condition = OK
        #: Set while the server cannot be reached: health turns degraded.
        self.unreachable_since_ms: int | None = None

    def open(self, prepare: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``prepare`` on a connection of its own (the version checks, the migrations: the
        pool's connections need the vector type to exist), then open the pool."""
        try:
            with self.connect(autocommit=True) as conn:
                # The start-up checks and migrations are not calls: statement_timeout is for those.
                conn.execute("SET statement_timeout = 0")
                result = prepare(conn)
        except psycopg.OperationalError as exc:
            raise StoreRefused(
                f"PostgreSQL at {redacted(self.url)} could not be reached: {type(exc).__name__}: {exc}"
            ) from None
        except psycopg.Error as exc:
            # The server answered but refused the schema set-up: most often a role that may not
            # create the vector extension or tables in its schema.
            raise StoreRefused(
                f"PostgreSQL at {redacted(self.url)} refused memoryd's schema set-up: {exc} "
                "(the role and privileges memoryd needs: docs/postgres.md)"
            ) from None
        try:
            self._pool.open(wait=True, timeout=self._connect_timeout)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreRefused(f"PostgreSQL at {redacted(self.url)} could not be reached: {exc}") from None
        return result

    @property
    def condition(self) -> Condition:
        since = self.unreachable_since_ms
        if since is not None:
            return Condition(
                "unavailable", "the PostgreSQL server cannot be reached; memoryd reconnects by itself", since
            )
        return self._condition

    @property
    def closed(self) -> bool:
        return self._closed

    def connect(self, **extra: Any) -> psycopg.Connection[Any]:
        """A connection of its own, outside the pool (LISTEN, migrations)."""
        return psycopg.connect(
            self.url, **{"connect_timeout": int(self._connect_timeout), **self._connect_kwargs, **extra}
        )

    def run_sync(self, fn: Callable[..., T], *args: Any, pipeline: bool = False, own_transaction: bool = False) -> T:
        """``fn(conn, *args)`` in one transaction: committed when it returns, rolled back when it raises.

        ``pipeline``: in libpq's pipeline mode, where a statement whose result is not read is
        sent with the next one that is, and the commit with them (one round trip for several
        statements).  ``fn`` must then read a statement's result (``fetchone``, iterating)
        before it uses it: a cursor's ``rowcount`` is unknown until then.

        ``own_transaction``: ``fn`` gets the connection in autocommit mode and opens its own
        transaction, so that BEGIN and COMMIT can travel with its statements in pipeline mode
        (psycopg's own transactions in a pipeline cost a round trip each); whatever it leaves
        open is rolled back.
        """
        from memoryd.ids import now_ms

        try:
            for attempt in range(1, CONFLICT_TRIES + 1):
                try:
                    result = self._attempt(fn, args, pipeline, own_transaction)
                    break
                except psycopg.Error as exc:
                    # A deadlock or a serialization failure: the server rolled the whole
                    # transaction back, so running it again is safe, and usually succeeds
                    # once the other transaction is through.
                    if getattr(exc, "sqlstate", None) not in CONFLICTS:
                        raise
                    if attempt == CONFLICT_TRIES:
                        raise StoreConflict(attempt, type(exc).__name__) from None
                    time.sleep(random.uniform(0.005, 0.05) * attempt)
        except (psycopg.OperationalError, PoolTimeout, PoolClosed) as exc:
            if isinstance(exc, psycopg.errors.QueryCanceled):
                raise StoreError(f"statement cancelled: {exc}") from None
            if not _lost_server(exc):
                # The server answered and refused this statement (a row too big, a resource
                # limit): the call fails; the server is not down, and health must not say so.
                raise StoreError(f"PostgreSQL refused the statement: {type(exc).__name__}: {exc}") from None
            if self.unreachable_since_ms is None:
                self.unreachable_since_ms = now_ms()
                log.warning("store: PostgreSQL unreachable (%s)", type(exc).__name__)
            raise StoreUnreachable("postgres", type(exc).__name__) from None
        if self.unreachable_since_ms is not None:
            self.unreachable_since_ms = None
            log.info("store: PostgreSQL reachable again")
        return result

    def _attempt(self, fn: Callable[..., T], args: tuple[Any, ...], pipeline: bool, own_transaction: bool) -> T:
        # While the server is known to be down, a call fails fast instead of waiting the
        # pool's full timeout: the caller gets its retryable error at once.
        wait = 1.0 if self.unreachable_since_ms is not None else None
        with self._pool.connection(timeout=wait) as conn:
            if own_transaction:
                return _autocommitted(conn, fn, *args)
            if pipeline:
                with conn.pipeline(), conn.transaction():
                    return fn(conn, *args)
            with conn.transaction():
                return fn(conn, *args)

    async def run(self, fn: Callable[..., T], *args: Any, pipeline: bool = False, own_transaction: bool = False) -> T:
        """``run_sync`` on a worker thread; the notifications ``fn`` sends go out once its
        transaction has committed, coalesced with other calls' (``notices``)."""

        def call() -> tuple[T, dict[notices.Notice, None]]:
            with notices.deferred() as pending:
                return self.run_sync(fn, *args, pipeline=pipeline, own_transaction=own_transaction), pending

        result, pending = await trio.to_thread.run_sync(call, limiter=self._limiter)
        await self.announcer.announce(pending)
        return result

    def size_bytes(self) -> int:
        return int(
            self.run_sync(lambda conn: conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
        )

    def release_waiters(self) -> None:
        """When the server cannot be reached, close the pool now: a call waiting for a connection
        (a worker's, when the daemon stops during an outage) fails at once, as unreachable, instead
        of waiting out the pool's timeout.  With the server up, nothing changes (the probe is one
        connection, opened and closed)."""
        if self._closed:
            return
        try:
            with self.connect(connect_timeout=1):
                return
        except psycopg.OperationalError:
            self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()


def _lost_server(exc: Exception) -> bool:
    """Whether ``exc`` means the server cannot be reached: no connection (no SQLSTATE, or class
    08) or the server ending the session (57P01-57P05), not a statement it refused."""
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith(("08", "57P"))


def _check_connection(conn: psycopg.Connection[Any]) -> None:
    """Before a pooled connection is used: raise if the server closed it (a restart, a
    failover, an administrator's terminate), without a round trip while it is sound.

    A server that ends a session sends its reason and closes the socket, so only an idle
    connection with something to read needs the pool's full check (a round trip, which fails
    on a closed one).  One with nothing to read is used as it is: if it breaks during the call,
    the call fails with the retryable error and the pool drops it.
    """
    if conn.closed or conn.broken or conn.pgconn.status != psycopg.pq.ConnStatus.OK:
        raise psycopg.OperationalError("the connection is closed")
    poller = select.poll()
    poller.register(conn.pgconn.socket, select.POLLIN)
    if poller.poll(0):
        ConnectionPool.check_connection(conn)


def _autocommitted(conn: psycopg.Connection[Any], fn: Callable[..., T], *args: Any) -> T:
    conn.autocommit = True
    try:
        return fn(conn, *args)
    finally:
        # A connection the server dropped is discarded by the pool as it is; any other goes back
        # idle and out of autocommit, as the pool's connections are.
        status = conn.info.transaction_status
        if not conn.closed and status != psycopg.pq.TransactionStatus.UNKNOWN:
            if status != psycopg.pq.TransactionStatus.IDLE:
                conn.rollback()
            conn.autocommit = False


def _configure(conn: psycopg.Connection[Any]) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    conn.commit()
