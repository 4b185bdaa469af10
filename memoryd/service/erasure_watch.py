"""Erasures made outside this daemon's own calls: `memoryd forget-user` run beside a running
daemon erases the user from the store, but the daemon's caches (summaries per scope, people per
owner) were built before.  memory.forget_all drops them itself; for the others, the store keeps a
mark every erasure replaces (``PeopleStore.erasure_mark``: SQLite a ``meta`` value, one key
look-up), and the daemon compares it before it answers from those caches.  On PostgreSQL an
erasure tells every daemon itself (NOTIFY ``erased:<user>``) and the mark is never read.

The mark does not say whom: erasures are rare, so every cached summary and people directory is
dropped, and rebuilt from the store on its next use.
"""

from __future__ import annotations

from collections.abc import Callable

from memoryd.store import PeopleStore

_UNSEEN = object()


class ErasureWatch:
    def __init__(self, people: PeopleStore) -> None:
        self._people = people
        self._mark: object = _UNSEEN
        #: Told that some user was erased elsewhere: drop everything cached of anyone.
        self.on_erased: list[Callable[[], None]] = []

    async def check(self) -> None:
        """Drop the caches when an erasure happened since the last check (or before the first:
        a cache filled before it may hold the erased user)."""
        mark = await self._people.erasure_mark()
        if mark is None or mark == self._mark:
            return
        self._mark = mark
        for listener in self.on_erased:
            listener()
