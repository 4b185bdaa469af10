"""Erasures made outside this daemon's own calls: `memoryd forget-user` run beside a running
daemon erases the user from the store, but the daemon's caches (summaries per scope, people per
owner) were built before.  memory.forget_all drops them itself; for the others, the store keeps a
log every erasure appends to (``PeopleStore.erasure_mark``, ``store/erasure_log.py``: SQLite a
``meta`` value, one key look-up), and the daemon reads it before it answers from those caches.
On PostgreSQL an erasure tells every daemon itself (NOTIFY ``erased:<user>``) and the log is
never read.

Only the caches of the users erased since the last check go; the first check, or one too far
behind the log to know whom it missed, drops them all (rebuilt from the store on next use).
An erasure that deleted group memories also drops every cached summary of a group chat: other
members' summaries were built from them (the log names no chat).
"""

from __future__ import annotations

from collections.abc import Callable

from memoryd.store import PeopleStore
from memoryd.store.erasure_log import Erased, everyone

#: Before the first check: whatever was cached may hold someone erased since the daemon started.
_UNSEEN = object()
#: The store had no erasure log at the last check.
_NO_LOG = object()


class ErasureWatch:
    def __init__(self, people: PeopleStore) -> None:
        self._people = people
        self._mark: object = _UNSEEN
        #: Told which users were erased elsewhere: drop what is cached of them.
        self.on_erased: list[Callable[[Erased], None]] = []
        #: Told that an erasure elsewhere deleted group memories: drop what was built from them.
        self.on_group_erased: list[Callable[[], None]] = []

    async def check(self) -> None:
        """Drop the erased users' caches when an erasure happened since the last check (every
        cache before the first check: one filled before it may hold an erased user)."""
        log = await self._people.erasure_mark()
        if log is None:
            self._mark = _NO_LOG
            return
        if log.last == self._mark:
            return
        if self._mark is _UNSEEN:
            erased: Erased = everyone
            group = True
        else:
            since = self._mark if isinstance(self._mark, int) else None
            erased, group = log.erased_since(since), log.group_erased_since(since)
        self._mark = log.last
        for listener in self.on_erased:
            listener(erased)
        if group:
            for dropped in self.on_group_erased:
                dropped()
