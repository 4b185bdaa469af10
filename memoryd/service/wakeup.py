"""How a background worker (embedding backfill, extraction, supersession) sleeps between claims.

It wakes when the next job comes due (due times are wall-clock milliseconds: they survive
restarts), when ``notify()`` says new work arrived, or after ``idle_poll`` seconds at the latest,
since another process (``memoryd jobs retry``) may have changed the job table meanwhile.
"""

from __future__ import annotations

import trio

from memoryd.ids import now_ms

IDLE_POLL_SECONDS = 30.0


class Wakeup:
    def __init__(self, idle_poll: float = IDLE_POLL_SECONDS) -> None:
        self.idle_poll = idle_poll
        self._event = trio.Event()

    def notify(self) -> None:
        self._event.set()

    def arm(self) -> None:
        """Call before each claim: a ``notify()`` from then on ends the next sleep, so work
        that arrives between the claim and the sleep is not slept through."""
        self._event = trio.Event()

    async def sleep(self, due_ms: int | None) -> None:
        """Until ``due_ms`` (None: no job is waiting), a notify, or the idle poll."""
        timeout = self.idle_poll
        if due_ms is not None:
            timeout = min(timeout, max(0.0, (due_ms - now_ms()) / 1000))
        with trio.move_on_after(timeout):
            await self._event.wait()
