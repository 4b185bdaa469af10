"""What searches learn of each scope key and keep for a minute (``ScopeStats``)."""

from __future__ import annotations

import time

from memoryd.store.postgres.search import vector_search
from memoryd.store.postgres.search.keyword import COMMON_DOCS


class ScopeStats:
    """What searches learn of each scope key and keep for a minute, so that a search of a known
    key sends fewer statements: which keys hold HNSW_FROM vectors or more (the plan of their
    KNN), which terms are common in a key and which keys hold COMMON_DOCS memories or more.

    Only facts that writes can hardly make wrong are kept, and a wrong one changes a plan, never
    what a search may find: a term's and a key's counts are capped at COMMON_DOCS, so "at the
    cap" is what measuring returns again until deletions bring it below (the term then ranks
    through the recent window instead of exactly); and a key near HNSW_FROM is searched well
    either way.  A new memory is found at once whatever is kept here (the candidates are read
    from the rows themselves)."""

    TTL_S = 60.0
    #: Past this many entries the memory starts again (a daemon serving very many users).
    MAX_ENTRIES = 100_000

    def __init__(self) -> None:
        self._known: dict[tuple[object, ...], tuple[bool, float]] = {}

    def get(self, *fact: object) -> bool | None:
        entry = self._known.get(fact)
        if entry is None or time.monotonic() - entry[1] > self.TTL_S:
            return None
        return entry[0]

    def put(self, value: bool, *fact: object) -> None:
        if len(self._known) >= self.MAX_ENTRIES:
            self._known.clear()
        self._known[fact] = (value, time.monotonic())

    # The facts kept:

    def big(self, key: str, generation: int) -> bool | None:
        return self.get("vectors", key, generation, vector_search.HNSW_FROM)

    def common(self, key: str, found: list[str]) -> bool:
        return bool(self.get("term", key, tuple(found), COMMON_DOCS))

    def full(self, key: str) -> bool:
        return bool(self.get("size", key, COMMON_DOCS))
