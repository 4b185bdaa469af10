"""Keeps numpy's OpenBLAS single-threaded; the local model parallelizes over chunks itself.

OpenBLAS threads meet at a barrier after every GEMM and spin while they wait.  When any other
process (or thread) wants a core, the one that got descheduled stalls the others: measured on
2 cores, a batch of 32 texts went from 166 ms to 528 ms with one busy loop beside it, and a
single text from 7 ms to 500 ms with a second BLAS user.  One BLAS thread per chunk and one
chunk per worker thread has no such barrier, and was faster too (135 ms for the batch of 32).
"""

from __future__ import annotations

import ctypes
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("memoryd.embed")

_CORE_NAMES = ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename")
_SETTERS = (
    "scipy_openblas_set_num_threads64_",  # numpy >= 2 wheels (scipy-openblas, ILP64)
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)


def limit_blas_threads(count: int = 1) -> bool:
    """Sets the thread count of every loaded OpenBLAS; False when none could be found.

    An explicit ``OPENBLAS_NUM_THREADS`` in the environment wins: the operator decided.
    """
    if os.environ.get("OPENBLAS_NUM_THREADS"):
        return False
    setters = _openblas_functions(_SETTERS)
    for setter in setters:
        setter.argtypes = [ctypes.c_int]
        setter.restype = None
        setter(count)
    if not setters:
        log.debug("no OpenBLAS found to limit; numpy BLAS threads left as they are")
    return bool(setters)


def openblas_kernel() -> str | None:
    """The kernel family OpenBLAS chose when it loaded (``Haswell``, ``SkylakeX``...), None if unknown.

    OpenBLAS picks it from the CPU unless ``OPENBLAS_CORETYPE`` names one; memoryd leaves that
    variable to the operator.  Pinned to ``Haswell`` (AVX2) on a CPU with AVX-512, the local
    model measured ~1.3x slower per query and ~1.5x per batch than with OpenBLAS's own choice.
    """
    getters = _openblas_functions(_CORE_NAMES)
    if not getters:
        return None
    getter = getters[0]  # numpy loads one OpenBLAS
    getter.argtypes = []
    getter.restype = ctypes.c_char_p
    value = getter()
    return value.decode("ascii", "replace") if value else None


def _openblas_functions(names: tuple[str, ...]) -> list[Any]:
    """The first of ``names`` found in each loaded OpenBLAS library."""
    import numpy  # noqa: F401  (make sure numpy's BLAS is loaded before looking for it)

    found = []
    for path in _loaded_openblas_libraries():
        try:
            library = ctypes.CDLL(str(path))  # already loaded: this only returns a handle
        except OSError:
            continue
        function = next((getattr(library, name) for name in names if hasattr(library, name)), None)
        if function is not None:
            found.append(function)
    return found


def _loaded_openblas_libraries() -> list[Path]:
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []  # not Linux: leave BLAS alone
    found: dict[str, Path] = {}
    for line in maps.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and "openblas" in Path(parts[5]).name.lower():
            found.setdefault(parts[5], Path(parts[5]))
    return list(found.values())
