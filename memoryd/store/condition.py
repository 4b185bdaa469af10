"""Whether the store can take writes: ``ok``, ``full`` (the disk) or ``corrupt`` (the file).

The connections report what SQLite answered (``Database`` calls ``full``, ``corrupt`` and
``wrote``); system.health and the systemd status line read ``current``.  Each change of state is
logged once, so a full disk under load writes two log lines (full, then space returned), not one
per failed call.  ``full`` clears itself on the next write that succeeds; ``corrupt`` never does
(the file must be checked and restored by a person), and while it holds no write is attempted.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Literal

from memoryd.ids import now_ms
from memoryd.log import fields

log = logging.getLogger("memoryd.store")

State = Literal["ok", "full", "corrupt"]


@dataclass(frozen=True)
class Condition:
    state: State
    #: Why, in words an operator can act on ("" when ok).
    reason: str = ""
    #: Wall-clock ms when this state began.
    since_ms: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"state": self.state, "reason": self.reason, "since_ms": self.since_ms}


OK = Condition("ok")


class StorageCondition:
    """The store's one state; safe to update from the writer's and the readers' threads."""

    def __init__(self, path: object) -> None:
        self._path = path
        self._lock = threading.Lock()
        self.current = OK

    def full(self) -> None:
        self._change(
            "full", "the disk is full: adds and deletes fail (nothing is written) until space is freed"
        )

    def corrupt(self, detail: str) -> None:
        self._change(
            "corrupt",
            f"the database file is damaged ({detail}): writes are stopped; "
            "run `memoryd check`, then restore a backup (see `memoryd backup`)",
        )

    def wrote(self) -> None:
        """A write transaction committed: a full disk has space again."""
        if self.current.state == "full":
            with self._lock:
                if self.current.state != "full":
                    return
                self.current = OK
            log.warning("store.space_returned: writes succeed again", extra=fields(path=str(self._path)))

    def _change(self, state: State, reason: str) -> None:
        with self._lock:
            # corrupt outranks full: freeing space does not mend a damaged file.
            if self.current.state == state or self.current.state == "corrupt":
                return
            self.current = Condition(state, reason, now_ms())
        log.error("store.%s: %s", state, reason, extra=fields(path=str(self._path)))
