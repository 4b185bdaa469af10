"""Schema step 009: a change stamp per vector partition, for the in-memory scan copies."""

from __future__ import annotations

import apsw


def m009_vector_epochs(db: apsw.Connection) -> None:
    """``vector_epochs``: each scope's vector partition gets a new random stamp whenever one of
    its vectors is written or deleted (``vectors.write_vectors`` / ``delete_vectors``), and the
    row ``''`` whenever the table is created or rebuilt.  A process that keeps a copy of a
    partition (``bit_index.py``) knows it is current while both stamps are unchanged, at the
    cost of one indexed read per search.  Existing partitions have no row yet: ``bit_index``
    reads a missing row as stamp 0, and the first write gives it one."""
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS vector_epochs (
            scope_key TEXT PRIMARY KEY,         -- '' stands for the whole vector table
            epoch INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT OR REPLACE INTO vector_epochs (scope_key, epoch) VALUES ('', random());
        """
    )
