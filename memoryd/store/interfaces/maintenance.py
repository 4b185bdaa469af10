"""``Maintenance``: what the maintenance task and the admin commands do to the whole store."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memoryd.store.admin_records import EvictionReport, Finding, GcReport, ImportReport, MemoryLine, PersonLine


@dataclass(frozen=True)
class MaintenanceReport:
    #: Steps spent compacting the indexes (0 when not asked to compact).
    compact_steps: int = 0
    #: False when something (a reader, another process) kept the work from finishing: it
    #: finishes on a later call.
    complete: bool = True
    #: What the engine did, in its own words, for an operator (`memoryd gc`): each engine's
    #: housekeeping means something different.
    done: str = ""


class Maintenance(Protocol):
    def mark_expired(self) -> int:
        """Record 'expired' once for each memory whose expiry passed; how many."""
        ...

    def gc(self, *, retention_ms: int, dry_run: bool = False) -> GcReport:
        """Remove memories deleted, expired or superseded more than ``retention_ms`` ago."""
        ...

    def enforce_max_entries(
        self, *, per_user: int, per_chat: int, protect_recent_ms: int, dry_run: bool = False
    ) -> EvictionReport:
        """Evict the weakest memories of over-full scopes (never pinned ones, never episodes),
        and record the caps as ``set_caps`` does.  ``dry_run``: only find the over-full scopes
        (``scopes``); nothing is evicted or recorded."""
        ...

    def set_caps(self, *, per_user: int, per_chat: int, protect_recent_ms: int) -> None:
        """The max_entries caps (0: none) every add holds from now on, in its own transaction."""
        ...

    def erase_user(
        self,
        user_id: str,
        *,
        actor: str,
        include_group: bool = False,
        usernames: Sequence[str] = (),
        dry_run: bool = False,
    ) -> dict[str, int]:
        """`memoryd forget-user`: ``MemoryStore.erase_user``, synchronous; ``dry_run`` only counts."""
        ...

    def maintain(self, *, compact: bool = False, release_space: bool = False) -> MaintenanceReport:
        """The engine's own housekeeping, which it alone knows the meaning of: ``compact``
        after many removals (index merges, planner statistics), ``release_space`` when the
        caller can wait for it (returning log space to the file system: admin gc, shutdown).
        Without either it does only what never blocks a reader or a writer."""
        ...

    def record_maintenance(self, summary: dict[str, object]) -> None: ...

    async def flush_hits(self) -> int:
        """Write the access counts gathered since the last flush; how many."""
        ...

    def stats(self) -> dict[str, Any]: ...

    def check(self) -> list[Finding]: ...

    def mark_damaged(self, detail: str) -> None:
        """A check outside the store found damage: writes stop, health turns degraded."""
        ...

    def repair(self, findings: list[Finding]) -> list[str]: ...

    def export(self, write: Callable[[bytes], object], *, user: str | None) -> int: ...

    def import_memories(
        self, lines: Iterable[MemoryLine | PersonLine], *, max_people: int | None = None
    ) -> ImportReport:
        """Insert the lines whose ids are new, all in one transaction.  ``max_people``
        (limits.max_people_per_owner): a person line that would give its owner more people than
        this is not imported and its id is listed in ``report.people.refused``; the rest goes in."""
        ...
