from __future__ import annotations

from typing import Any


class Conversations:
    def __init__(self, store: Any) -> None:
        self._store = store
        self._db = store.db
        self._clock = store.clock
