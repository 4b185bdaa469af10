"""Schema step 012: the rescoring copies become 6-bit: 288 instead of 384 bytes at 384-d."""

from __future__ import annotations

import apsw


def m012_six_bit_rescoring_copies(db: apsw.Connection) -> None:
    """Nothing to do here any more: the int8 copies are re-encoded as 6-bit copies by m014,
    which moves them out of the vec0 table into ``vector_copies`` (and a store that took this
    step when it rewrote the copies inside the vec0 table gets them moved as they are).  The
    step stays on the ladder so that every store's ``user_version`` keeps its meaning."""
    del db
