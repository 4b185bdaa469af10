"""Schema step 011: a memory's row is the record of its add; ``events`` becomes a view.

A million memories kept a million ``added`` audit rows (~58 bytes each, ~47 more in
``events_memory``) saying what the rows say: who added the memory (its owner) and when (its
``created_at_ms``).  From this step on:

* the stored audit rows live in ``audit_events`` (the table ``events`` was, renamed with its
  indexes); the add path writes none;
* a purge writes the memory's ``added`` event from its row first (``retention.purge_batch``), so
  the trail of a purged memory stays whole until it is pruned with the rest (with the add's
  time but a later ``event_id`` than the events before the purge: a trail is in order by
  ``at_ms``, then ``event_id``);
* ``events`` is a view: the stored rows, plus one ``added`` row (``event_id`` NULL, which sorts
  first, as the add comes first) for every memory whose trail stores neither an ``added`` nor an
  ``imported`` event (an imported memory never had an ``added`` one).  Readers of ``events``
  get the answers they got before.

The ``added`` rows of existing memories that say exactly what the row says (same owner, same
time) are deleted; any other stays.  Their pages are free for the next writes; the file
shrinks only with a VACUUM (README, "Disks and files")."""

from __future__ import annotations

import apsw


def m011_added_events_from_rows(db: apsw.Connection) -> None:
    renamed = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_events'").fetchone()
    if renamed is None:  # (a store whose user_version a test rewound is renamed already)
        db.execute("ALTER TABLE events RENAME TO audit_events")
    db.execute(
        """
        DELETE FROM audit_events WHERE event = 'added' AND EXISTS (
            SELECT 1 FROM memories AS m WHERE m.id = audit_events.memory_id
            AND m.created_at_ms = audit_events.at_ms AND m.owner IS audit_events.actor)
        """
    )
    db.execute(
        """
        CREATE VIEW IF NOT EXISTS events (event_id, memory_id, event, actor, at_ms, detail) AS
        SELECT event_id, memory_id, event, actor, at_ms, detail FROM audit_events
        UNION ALL
        SELECT NULL, m.id, 'added', m.owner, m.created_at_ms, '{}' FROM memories AS m
        WHERE NOT EXISTS (SELECT 1 FROM audit_events AS a
                          WHERE a.memory_id = m.id AND a.event IN ('added', 'imported'))
        """
    )
