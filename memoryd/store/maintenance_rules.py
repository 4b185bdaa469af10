"""The whole-store operations' rules both engines apply: how `memoryd stats` tallies memories
by state, whom an erasure names, and what the log says of a new vector space generation.

Each engine counts and deletes with its own SQL; what the counts add up to and which names
stand for the erased user is decided here once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from memoryd.store.admin_records import MEMORY_STATES
from memoryd.store.interfaces.backend import VectorSpaceInfo
from memoryd.store.visibility import scope_kind

log = logging.getLogger("memoryd.store")

#: What an erased user's id becomes where a row must keep an owner (a group memory).
ERASED = "(erased)"


def _states() -> dict[str, int]:
    return dict.fromkeys(MEMORY_STATES, 0)


class StateTally:
    """Memories by state (``MEMORY_STATES``) in total, by scope kind, by owner and by source,
    from the rows of one grouped count: (owner, shared, source, state, count)."""

    def __init__(self) -> None:
        self.totals = _states()
        self.by_scope = {"personal": _states(), "group": _states()}
        self.by_user: dict[str, dict[str, int]] = {}
        self.by_source: dict[str, dict[str, int]] = {}

    def add(self, rows: Iterable[tuple[Any, ...]]) -> None:
        for owner, shared, source, state, count in rows:
            self.totals[state] += count
            self.by_scope[scope_kind(bool(shared))][state] += count
            self.by_user.setdefault(owner, _states())[state] += count
            self.by_source.setdefault(source, _states())[state] += count

    def report(self, *, chats: int, accessed: int, hits: int) -> dict[str, Any]:
        """The counting part of `memoryd stats`: busiest users and sources first."""
        users = sorted(self.by_user.items(), key=lambda item: (-sum(item[1].values()), item[0]))
        return {
            "memories": {"total": sum(self.totals.values()), **self.totals},
            "by_scope": {**self.by_scope, "chats": int(chats)},
            "by_user": [{"user": user, **states} for user, states in users],
            "by_source": dict(sorted(self.by_source.items(), key=lambda item: (-sum(item[1].values()), item[0]))),
            "access": {"memories_retrieved": int(accessed), "retrievals": int(hits)},
        }


def spoken_names(given: Iterable[str], recorded: Iterable[object]) -> list[str]:
    """The usernames a user spoke under, with and without their ``@``: those ``given`` by the
    caller and those the store ``recorded`` for their sessions and messages."""
    found = {name.lstrip("@") for name in given if name}
    found.update(str(name).lstrip("@") for name in recorded)
    return sorted(found | {"@" + name for name in found})


def log_generation_started(space: VectorSpaceInfo, queued: int) -> None:
    """A new vector space generation (the first embedder, or a reindex) and the embed jobs it queued."""
    log.info(
        "vector space generation %d: %s dim %d (%d embed jobs queued)",
        space.generation,
        space.model,
        space.dim,
        queued,
    )
