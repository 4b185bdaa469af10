"""Run calls concurrently and collect each one's result or error (helpers for tests)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

T = TypeVar("T")


async def gather_outcomes(
    calls: list[Callable[[], Awaitable[T]]], catch: type[BaseException] | tuple[type[BaseException], ...] = Exception
) -> list[T | BaseException]:
    """Each call's result, or the ``catch`` error it raised, in order (under a 10 s deadline)."""
    results: list[T | BaseException] = [RuntimeError("not run")] * len(calls)

    async def one(index: int) -> None:
        try:
            results[index] = await calls[index]()
        except catch as exc:
            results[index] = exc

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for index in range(len(calls)):
                nursery.start_soon(one, index)
    return results
