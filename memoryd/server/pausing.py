"""Background workers that a full disk, a damaged file or a lock held by another process
pauses instead of stopping the daemon."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from memoryd.errors import DiskFull, StoreBusy, StoreConflict, StoreCorrupt, StoreUnreachable
from memoryd.log import fields

log = logging.getLogger("memoryd.daemon")


#: How long a worker stopped by a full disk, a damaged file or a lock waits before it tries again.
STORAGE_RETRY_SECONDS = 5.0


async def despite_storage_faults(
    run: Callable[[], Awaitable[None]], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run a background worker (the embedding backfill, supersession) that a full disk or a damaged file
    must pause, not bring the daemon down with it; the store logged the fault once.  So must
    another process's write lock held past the busy timeout (a long `memoryd import` step on a
    loaded machine): its transaction wrote nothing, and a job it had claimed is taken up again
    once its lease lapses (the backfill clears its leases when it starts again).  So must a
    PostgreSQL transaction rolled back as a deadlock on every try: nothing was written either."""
    task_status.started()
    while True:
        try:
            await run()
        except (DiskFull, StoreCorrupt, StoreUnreachable, StoreBusy, StoreConflict) as exc:
            log.debug("worker.paused", extra=fields(reason=str(exc), retry_in=STORAGE_RETRY_SECONDS))
            await trio.sleep(STORAGE_RETRY_SECONDS)
