"""The background tasks the daemon runs beside its server, and what wakes them or clears their
caches when another daemon sharing the store (PostgreSQL) changed something.

``daemon.py`` starts them, in this order, before the socket is served; leaving the nursery
stops them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import trio

from memoryd.config import Config
from memoryd.embed import CoalescingEmbedder
from memoryd.errors import DiskFull, StoreCorrupt, StoreUnreachable
from memoryd.log import fields
from memoryd.server.heap_trim import HeapTrimmer
from memoryd.server.pausing import despite_storage_faults
from memoryd.server.wiring import Services
from memoryd.service.maintenance import Maintenance
from memoryd.store.erasure_log import DELETED, GROUP_ERASED, everyone
from memoryd.store.interfaces import Backend
from memoryd.store.visibility import personal_key

log = logging.getLogger("memoryd.daemon")


async def start_workers(
    nursery: trio.Nursery,
    config: Config,
    store: Backend,
    services: Services,
    coalescer: CoalescingEmbedder | None,
    requests_total: Callable[[], int],
) -> Maintenance:
    """Start every background task in ``nursery``; the maintenance task, once started.
    ``requests_total`` counts the server's requests (the heap trimmer waits for a quiet spell)."""
    extraction = services.extraction
    if coalescer is not None:
        await nursery.start(coalescer.run)
    if services.backfill is not None:
        await release_leases(store)
        await nursery.start(despite_storage_faults, services.backfill.run)
    if extraction is not None:
        await nursery.start(despite_storage_faults, extraction.run)
    await nursery.start(services.summaries.run)
    # A full disk or a damaged file pauses it like the backfill.
    await nursery.start(despite_storage_faults, services.supersession_worker.run)
    # A store shared with other daemons (PostgreSQL) tells when one of them queued
    # work, so these workers need not wait for their next poll.
    listen_for_work = getattr(store, "listen_for_work", None)
    if listen_for_work is not None:
        await nursery.start(
            listen_for_work,
            functools.partial(wake, services),
            functools.partial(changed_elsewhere, services),
        )
    # Expiry, gc, max_entries (a pass now, then on a timer) and access-count flushes.
    maintenance = Maintenance(
        store.maintenance, config.lifecycle, conversations=store.conversations, extraction=config.extraction,
        episodes=config.episodes,
    )  # fmt: skip
    # An evicted memory may be quoted by a cached summary, as a deleted one may.
    maintenance.on_evicted.append(services.summaries.note_deleted_key)
    await nursery.start(maintenance.run)
    trimmer = HeapTrimmer(lambda: (requests_total(), store.memories.write_count))
    await nursery.start(trimmer.run)
    return maintenance


def wake(services: Services) -> None:
    """Another daemon queued work: the workers look for it now."""
    if services.backfill is not None:
        services.backfill.notify()
    if services.extraction is not None:
        services.extraction.notify()
    services.supersession_worker.notify()


def changed_elsewhere(services: Services, keys: set[str]) -> None:
    """Another daemon changed memories under these scope keys, or an owner's people
    (``people:<owner>``), or a process erased a user (``erased:<user>``: `memoryd forget-user`
    or memory.forget_all) and maybe their group memories (``erased-group``), or deleted or evicted
    memories under a scope key (``deleted:<key>``, sent beside the bare key), or ``*``: changes may
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
            owner = key.removeprefix("people:")
            if services.people is not None:
                services.people.forget_directory(owner)
            # A merge, an alias or a relationship changes no memory's scope key, but the owner's
            # summaries group their memories by person: as when this daemon changes people.
            services.summaries.note_changed_key(personal_key(owner))
        elif key.startswith(DELETED):
            # Memories under the key were deleted or evicted: summaries may quote them.
            services.summaries.note_deleted_key(key.removeprefix(DELETED))
        else:
            services.summaries.note_changed_key(key)


async def release_leases(store: Backend) -> None:
    """The embed jobs a previous run left leased are due again, before the first request: an
    add answered after this leases its own job while it embeds its text, and that lease must
    hold (freed, the backfill would embed the same text a second time)."""
    try:
        await trio.to_thread.run_sync(store.jobs.release_leases)
    except (DiskFull, StoreCorrupt, StoreUnreachable) as exc:
        # The store logged the fault; those jobs are claimed when their leases run out.
        log.warning("backfill.leases_kept", extra=fields(reason=str(exc)))
