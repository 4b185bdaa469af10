"""The stamps of the vec0 tables' contents (``vector_epochs``, schema m009).

Each scope's partition, and the whole table (``WHOLE_TABLE``), carries a random stamp that every
vector write and delete renews in the writer's transaction (``vectors.py``).  Two snapshots that
read the same stamps see the same vectors: the in-memory copies (``bit_index.py``) are used only
while their stamp is current, and a KNN list scanned on another reader only while the scope's
stamps match (``vector_search.scan_state``).
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw

Stamp = tuple[int, int]  # the table's epoch, the partition's epoch

#: The stamp row of the whole vec0 table (no scope key is empty).
WHOLE_TABLE = ""
_EPOCHS_SQL = "SELECT scope_key, epoch FROM vector_epochs WHERE scope_key IN ('', ?)"


def read_stamp(db: apsw.Connection, partition: str) -> Stamp:
    found = dict(db.execute(_EPOCHS_SQL, (partition,)).fetchall())
    return int(found.get(WHOLE_TABLE, 0)), int(found.get(partition, 0))


def renew_stamps(db: apsw.Connection, partitions: Iterable[str]) -> None:
    """New random stamps for ``partitions`` (``WHOLE_TABLE``: the vec0 table itself), in the
    writer's transaction: a copy read before it is never used after it."""
    db.executemany(
        "INSERT OR REPLACE INTO vector_epochs (scope_key, epoch) VALUES (?, random())",
        [(partition,) for partition in partitions],
    )
