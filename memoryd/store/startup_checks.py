"""Start-up checks that have nothing to do (an engine that guards its own data)."""

from __future__ import annotations

from collections.abc import Callable


class NoCheck:
    """``interfaces.StartupCheck`` that passed at once: the database server checks its own
    pages (PostgreSQL's checksums and WAL), so the daemon waits for nothing."""

    finished = True
    problems = ""

    def store_opened(self, on_damage: Callable[[str], None]) -> None:
        return None

    async def wait(self, seconds_after_start: float) -> None:
        return None

    def damage_found_within(self, seconds: float) -> bool:
        return False

    def join(self) -> None:
        return None

    def stop(self) -> None:
        return None
