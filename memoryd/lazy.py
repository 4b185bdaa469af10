"""Made on first use: a package's names imported when first asked for (PEP 562).

``memoryd serve`` imports ~500 modules before it can answer; each package whose heavier parts
only some configurations need (the store's, the embedders', the LLM clients') hands them out
through :func:`exports_on_first_use`, so that start-up pays only for what it runs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def exports_on_first_use(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps each name to the module that
    defines it; the first lookup imports that module and keeps the name in the package."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
