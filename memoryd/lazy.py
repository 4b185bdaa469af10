"""Made on first use: a package's names imported when first asked for (PEP 562), and
regular expressions compiled when first used.

``memoryd serve`` imports ~500 modules before it can answer; each package whose heavier parts
only some configurations need (the store's, the embedders', the LLM clients') hands them out
through :func:`exports_on_first_use`, so that start-up pays only for what it runs.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar


def exports_on_first_use(package: str, exports: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps each module to the names the
    package hands out from it (as its ``TYPE_CHECKING`` imports list them); the first lookup of
    a name imports its module and keeps the name in the package."""
    module_of = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


class LazyPattern:
    """A regular expression compiled on first use, with the ``re.Pattern`` methods memoryd uses.

    The knowledge rules and the secrets filter hold ~100 patterns, some with alternations of
    hundreds of words: compiled at import they cost ~40 ms of every start, before the daemon
    can answer.  ``compile_waiting`` compiles the rest once the daemon is ready.
    """

    __slots__ = ("source", "flags", "_compiled")
    _waiting: ClassVar[list[LazyPattern]] = []

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source = source
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None
        LazyPattern._waiting.append(self)

    def _compile(self) -> re.Pattern[str]:
        # Two threads may both compile it the first time: the same pattern either way.
        compiled = self._compiled = re.compile(self.source, self.flags)
        return compiled

    # The methods below compile on first use inline (a property or helper call costs ~80 ns,
    # and the knowledge rules run ~100 matches per memory.add).

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return (self._compiled or self._compile()).match(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return (self._compiled or self._compile()).fullmatch(string, pos, endpos)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return (self._compiled or self._compile()).search(string, pos, endpos)

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        return (self._compiled or self._compile()).finditer(string, pos, endpos)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return (self._compiled or self._compile()).sub(repl, string, count)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        return (self._compiled or self._compile()).split(string, maxsplit)

    @classmethod
    def compile_waiting(cls) -> int:
        """Compiles every pattern not used yet (after start-up, in a worker thread); how many."""
        waiting, cls._waiting = cls._waiting, []
        fresh = [pattern for pattern in waiting if pattern._compiled is None]
        for pattern in fresh:
            pattern._compile()
        return len(fresh)
