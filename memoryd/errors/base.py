"""The root of memoryd's error hierarchy, and the one error an exception group stands for."""

from __future__ import annotations


def lone_leaf(exc: BaseException) -> BaseException:
    """The exception ``exc`` stands for when it is a tree of exception groups (what a nursery makes
    of its body's errors) whose leaves are all of one class: the first leaf (two readers of one
    search that both found the file damaged are one damaged file); else ``exc`` itself."""
    if not isinstance(exc, BaseExceptionGroup):  # every plain error reply passes here
        return exc
    leaves: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending:
        item = pending.pop()
        if isinstance(item, BaseExceptionGroup):
            pending.extend(reversed(item.exceptions))
        elif leaves and type(item) is not type(leaves[0]):
            return exc
        else:
            leaves.append(item)
    return leaves[0] if leaves else exc


class MemorydError(Exception):
    """Base of every error memoryd raises on purpose."""
