"""Schema step 012: the rescoring copies become 6-bit (``vector_codec.py``): 288 instead of 384
bytes at 384-d, ~96 bytes per memory (issue 13: at most 1 KB per memory at a million)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

import apsw

#: Copies converted per numpy call.
from memoryd.store.sqlite.vectors import vector_codec, vectors

#: Copies converted per numpy call.
_BATCH = 20_000


def m012_six_bit_rescoring_copies(db: apsw.Connection) -> None:
    """Every int8 copy is re-encoded as a 6-bit copy.  The copies are in vec0's shadow table
    ``<table>_auxiliary (rowid, value00)`` (sqlite-vec 0.1.9's layout), which is rewritten in
    rowid order, so its pages come out packed: updated in place, the shrunk rows would leave each
    page a quarter empty and the table as big as before.  With another layout the int8 copies
    are left as they are: they are still read (``vector_codec``), and new ones are 6-bit.
    Nothing a search caches depends on the copies (``bit_index`` holds the sign bits and the
    metadata), so no stamp is renewed."""
    space = vectors.read_space(db)
    if space is None or vector_codec.fine_length(space.dim) == space.dim:
        return
    auxiliary = f"{space.table}_auxiliary"
    columns = [row[1] for row in db.execute(f"SELECT * FROM pragma_table_info('{auxiliary}')")]
    if columns == ["rowid", "value00"]:
        _rewrite_packed(db, auxiliary, space.dim)


def _rewrite_packed(db: apsw.Connection, auxiliary: str, dim: int) -> None:
    db.execute("CREATE TEMP TABLE rescoring_upgrade (id INTEGER PRIMARY KEY, copy BLOB)")
    db.executemany(
        "INSERT INTO temp.rescoring_upgrade (id, copy) VALUES (?, ?)",
        _converted(db, f"SELECT rowid, value00 FROM {auxiliary} ORDER BY rowid", dim),
    )
    db.execute(f"DELETE FROM {auxiliary}")
    db.execute(f"INSERT INTO {auxiliary} (rowid, value00) SELECT id, copy FROM temp.rescoring_upgrade ORDER BY id")
    db.execute("DROP TABLE temp.rescoring_upgrade")


def _converted(db: apsw.Connection, query: str, dim: int) -> Iterator[tuple[int, bytes]]:
    """(rowid, 6-bit copy) for each row of ``query`` (rowid, stored copy), int8 copies
    converted in batches (one numpy call per batch instead of one per copy)."""
    cursor = db.execute(query)
    while batch := list(islice(cursor, _BATCH)):
        old = [i for i, (_, blob) in enumerate(batch) if len(blob) == dim]
        new = dict(zip(old, vector_codec.fine_from_int8([batch[i][1] for i in old], dim), strict=True))
        for i, (rowid, blob) in enumerate(batch):
            yield rowid, new.get(i, blob)
