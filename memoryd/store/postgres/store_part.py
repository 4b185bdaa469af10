"""``StorePart``: what each part of ``PostgresStore`` behind an interface (``Memories``, ``Jobs``,
``Supersessions``, ``People``, ``Conversations``, ``Maintenance``) holds of the store: the store
itself, its database and its clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memoryd.store.postgres.db import Database


class StorePart:
    def __init__(self, store: Any) -> None:
        self._store = store
        self._db: Database = store.db
        self._clock: Callable[[], int] = store.clock
