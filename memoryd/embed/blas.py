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

log = logging.getLogger("memoryd.embed")

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
    import numpy  # noqa: F401  (make sure numpy's BLAS is loaded before looking for it)

    done = False
    for path in _loaded_openblas_libraries():
        try:
            library = ctypes.CDLL(str(path))  # already loaded: this only returns a handle
        except OSError:
            continue
        for name in _SETTERS:
            setter = getattr(library, name, None)
            if setter is not None:
                setter.argtypes = [ctypes.c_int]
                setter.restype = None
                setter(count)
                done = True
                break
    if not done:
        log.debug("no OpenBLAS found to limit; numpy BLAS threads left as they are")
    return done


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
