"""LISTEN/NOTIFY: idle workers of every daemon wake when another daemon queues work.

Writes that queue work (an add's embed job, observed messages, a deferred supersession, an
import) send a notification once their transaction has committed (``jobs.notify``, coalesced
across calls by ``notices.Announcer``).  Each daemon listens on one dedicated connection outside the pool, awaited natively
(``trio.lowlevel.wait_readable`` on its socket, then libpq's ``consume_input``/``notifies``),
and wakes its workers; a lost connection is opened again, with a wake, since notifications sent
meanwhile were missed.  Workers still poll (``service/wakeup.py``), so a missed wake delays work,
never loses it.  Caches have no poll: after a reconnection ``changed`` gets ``EVERYTHING``, so a
change or an erasure made elsewhere while this daemon was not listening is never served from them.
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

#: The key ``changed`` gets when notifications may have been missed: every cache is out of date.
EVERYTHING = "*"


async def listen_for_work(
    db: Database,
    wake: Callable[[], None],
    changed: Callable[[set[str]], None] | None = None,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """``wake()`` when work was queued; ``changed(keys)`` with the scope keys (and
    ``people:<owner>``) another daemon changed, or ``EVERYTHING`` after a reconnection."""
    started = False
    interrupted = False
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
                # Notifications sent while this daemon was not listening were missed.
                wake()
                if changed is not None:
                    changed({EVERYTHING})
            if interrupted:
                log.info("store: work notifications listened to again")
                interrupted = False
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
            # Once per outage at info: the attempts repeat every second while the server is down.
            log.log(
                logging.DEBUG if interrupted else logging.INFO,
                "store: work notifications interrupted (%s); reconnecting",
                type(exc).__name__,
            )
            interrupted = True
            if not started:
                task_status.started()
                started = True
            await trio.sleep(RECONNECT_SECONDS)
        finally:
            if conn is not None:
                conn.close()
