"""Schema step 008: the vector table's rescoring copies become int8 (issue 13, a million memories)."""

from __future__ import annotations

import apsw

from memoryd.store import vectors


def m008_int8_rescoring_copies(db: apsw.Connection) -> None:
    """The rescoring copies become int8 (``dim`` bytes) instead of float16 (``2 * dim``): at a
    million memories they were half of the file (``vector_codec.py``).  The table is rewritten,
    so its pages are packed; the pages it leaves are free for reuse."""
    space = vectors.read_space(db)
    if space is not None:
        vectors.rebuild_table(db, space)
