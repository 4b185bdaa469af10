"""LISTEN/NOTIFY: idle workers of every daemon wake when another daemon queues work.

Writes that queue work (an add's embed job, observed messages, a deferred supersession, an
import) send a notification once their transaction has committed (``jobs.notify``, coalesced
across calls by ``notices.Announcer``).  Each daemon listens on one dedicated connection outside the pool, awaited natively
(``trio.lowlevel.wait_readable`` on its socket, then libpq's ``consume_input``/``notifies``),
and wakes its workers; a lost connection is opened again, with a wake, since notifications sent
meanwhile were missed.  Workers still poll (``service/wakeup.py``), so a missed wake delays work,
never loses it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import psycopg
import trio

from memoryd.store.postgres.db import Database
from memoryd.store.postgres.jobs import CHANGES, CHANNEL

log = logging.getLogger("memoryd.store")

RECONNECT_SECONDS = 1.0


async def listen_for_work(
    db: Database,
    wake: Callable[[], None],
    changed: Callable[[set[str]], None] | None = None,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """``wake()`` when work was queued; ``changed(keys)`` with the scope keys (and
    ``people:<owner>``) another daemon changed."""
    started = False
    while True:
        conn: psycopg.Connection[object] | None = None
        try:
            conn = listening = await trio.to_thread.run_sync(lambda: db.connect(autocommit=True))
            listening.execute(f"LISTEN {CHANNEL}")  # our own channel names
            if changed is not None:
                listening.execute(f"LISTEN {CHANGES}")
            if not started:
                task_status.started()
                started = True
            else:
                wake()  # notifications sent while this daemon was not listening were missed
            pgconn = listening.pgconn
            while True:
                await trio.lowlevel.wait_readable(pgconn.socket)
                pgconn.consume_input()
                woken = False
                keys: set[str] = set()
                while (notification := pgconn.notifies()) is not None:
                    if notification.relname.decode() == CHANGES:
                        keys.add(notification.extra.decode())
                    else:
                        woken = True
                if woken:
                    wake()
                if keys and changed is not None:
                    changed(keys)
        except (psycopg.OperationalError, psycopg.errors.AdminShutdown, OSError) as exc:
            log.info("store: work notifications interrupted (%s); listening again", type(exc).__name__)
            if not started:
                task_status.started()
                started = True
            await trio.sleep(RECONNECT_SECONDS)
        finally:
            if conn is not None:
                conn.close()
