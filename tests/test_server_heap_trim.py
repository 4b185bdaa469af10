"""HeapTrimmer: free heap goes back to the OS once a burst of work is over, not during it."""

from __future__ import annotations

import trio
import trio.testing

from memoryd.heap import release_free_heap
from memoryd.server.heap_trim import HeapTrimmer


class Work:
    def __init__(self) -> None:
        self.done = 0
        self.releases = 0

    def release(self) -> None:
        self.releases += 1


async def test_it_trims_once_after_start_up_then_once_per_burst_and_not_while_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    work = Work()
    trimmer = HeapTrimmer(lambda: work.done, interval=1.0, release=work.release)
    async with trio.open_nursery() as nursery:
        await nursery.start(trimmer.run)
        await trio.sleep(1.5)
        assert work.releases == 1  # start-up was a burst
        await trio.sleep(60)
        assert work.releases == 1  # idle: nothing to give back
        for _ in range(10):  # a burst of 10 s: work seen at every tick
            work.done += 1
            await trio.sleep(1.0)
        assert work.releases == 1  # not during it
        await trio.sleep(2.5)
        assert work.releases == 2  # once, after a quiet second
        await trio.sleep(30)
        assert trimmer.releases == work.releases == 2
        nursery.cancel_scope.cancel()


def test_releasing_the_free_heap_works_on_this_libc() -> None:
    release_free_heap()  # glibc's malloc_trim, or nothing elsewhere: never raises
