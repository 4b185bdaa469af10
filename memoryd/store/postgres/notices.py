"""Notifications to every daemon on the database (``LISTEN``/``NOTIFY``), sent after the
transaction that causes them has committed, and coalesced.

A ``NOTIFY`` inside a write transaction takes one lock for the whole PostgreSQL cluster at
commit and keeps it until the commit is flushed to disk: every write that notifies then commits
one at a time, across all daemons, and group commit cannot help (measured: adds of different
users from two daemons waited most of their time on that lock).  So a call made through
``Database.run`` collects its notifications instead (``deferred``), and once its transaction
has committed hands them to the daemon's ``Announcer``, which sends everything collected
meanwhile by all calls in one short transaction of its own, with ``synchronous_commit = off``
(a notification has nothing to make durable).  The call returns only after its notifications
were sent, so a caller's reply still follows them, as it followed the commit that sent them.

Outside ``Database.run`` (admin commands, the synchronous calls) ``send`` notifies inside the
caller's transaction, delivered when it commits.  A daemon that dies between a commit and its
notification loses that notification: the others' workers poll (``service/wakeup.py``), so
queued work waits for the next poll, never longer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import trio

from memoryd.store.erasure_log import DELETED

log = logging.getLogger("memoryd.store")

Conn = psycopg.Connection[Any]
Notice = tuple[str, str]  # (channel, payload)

#: The channel that wakes idle workers of every daemon when work is queued.
WORK = "memoryd_work"
#: The channel that tells every daemon which scope keys (``u:``/``c:``) or owners' people
#: (``people:<owner>``) changed, so that their caches of them are rebuilt, and under which keys
#: memories were deleted or evicted (``deleted:<key>``: the summaries seeing them are dropped).
CHANGES = "memoryd_changes"

_local = threading.local()


def send(conn: Conn, channel: str, payload: str = "") -> None:
    """Notify ``channel``: collected for after the commit inside ``deferred``, else delivered
    when ``conn``'s transaction commits."""
    pending: dict[Notice, None] | None = getattr(_local, "pending", None)
    if pending is None:
        conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))
    else:
        pending[(channel, payload)] = None


def deleted(conn: Conn, scope_key: str) -> None:
    """Tell every daemon that memories under ``scope_key`` were deleted or evicted: their cached
    summaries that see it may quote them, and go (``deleted:<key>``).  The bare key is sent too,
    for a daemon that does not know that notice: it marks those summaries stale, as for an add."""
    send(conn, CHANGES, scope_key)
    send(conn, CHANGES, DELETED + scope_key)


@contextmanager
def deferred() -> Iterator[dict[Notice, None]]:
    """Collect this thread's ``send`` calls (in order, each once) instead of notifying."""
    outer = getattr(_local, "pending", None)
    pending: dict[Notice, None] = {}
    _local.pending = pending
    try:
        yield pending
    finally:
        _local.pending = outer


def send_all(conn: Conn, notices: list[Notice]) -> None:
    """Every notice in one statement, in a transaction that need not wait for its flush."""
    conn.execute(
        "SELECT set_config('synchronous_commit', 'off', true), "
        "(SELECT count(pg_notify(n.channel, n.payload)) FROM unnest(%s::text[], %s::text[]) AS n(channel, payload))",
        ([channel for channel, _ in notices], [payload for _, payload in notices]),
    )


class Announcer:
    """Sends the notices of committed calls, many calls' at once (as group commit does): while
    one batch is being sent, the notices arriving meanwhile wait for the next one."""

    def __init__(self, run: Callable[[list[Notice]], Any]) -> None:
        """``run(notices)`` sends them (``Database.run_sync`` of ``send_all``, on a thread)."""
        self._run = run
        self._pending: dict[Notice, None] = {}
        self._started = 0
        self._finished = 0
        self._busy = False
        self._done = trio.Event()
        #: Batches sent, and the notices in them.
        self.batches = 0
        self.sent = 0

    async def announce(self, notices: dict[Notice, None]) -> None:
        """Returns once a batch holding ``notices`` was sent (or failed: logged, not raised,
        since the writes that caused them are committed)."""
        if not notices:
            return
        self._pending.update(notices)
        # Shielded: a caller cancelled while waiting would leave its notices unsent until some
        # later call's batch (sending takes one short statement, bounded by the pool's timeout).
        with trio.CancelScope(shield=True):
            await self._send(self._started + 1)

    async def _send(self, wanted: int) -> None:
        """Until batch number ``wanted`` was sent: send one when none is being sent."""
        while self._finished < wanted:
            if self._busy:
                await self._done.wait()
                continue
            self._busy = True
            self._started += 1
            batch, self._pending = list(self._pending), {}
            try:
                await trio.to_thread.run_sync(self._run, batch)
                self.batches += 1
                self.sent += len(batch)
            except Exception as exc:  # the writes are committed; workers still poll
                log.warning("store: %d notifications not sent (%s)", len(batch), type(exc).__name__)
            finally:
                self._busy = False
                self._finished += 1
                done, self._done = self._done, trio.Event()
                done.set()
