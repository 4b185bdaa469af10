"""Whether the store can take writes: ``ok``, ``full`` (the disk), ``corrupt`` (the data) or
``unavailable`` (a database server that cannot be reached), and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal["ok", "full", "corrupt", "unavailable"]


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
