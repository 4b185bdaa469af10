"""Schema step 006: the people of each owner and the links from memories to them."""

from __future__ import annotations

import apsw


def m006_people(db: apsw.Connection) -> None:
    """The people in each owner's life and the memories about them (see ``people.py``).

    A person belongs to one owner and is never shown to anybody else; a link is only a pointer,
    so what a caller sees of the linked memories is still decided by ``visibility.predicate``.
    """
    db.execute(
        """
        CREATE TABLE people (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,            -- ULID
            owner TEXT NOT NULL,
            name TEXT NOT NULL,
            aliases TEXT NOT NULL DEFAULT '[]', -- JSON array: "my wife", "Sara", ...
            relationship TEXT,                  -- canonical: wife, boss, dog, ...
            created_at_ms INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL
        );
        CREATE INDEX people_owner ON people (owner, name);

        CREATE TABLE memory_people (
            person_rowid INTEGER NOT NULL REFERENCES people (rowid) ON DELETE CASCADE,
            memory_rowid INTEGER NOT NULL REFERENCES memories (rowid) ON DELETE CASCADE,
            PRIMARY KEY (person_rowid, memory_rowid)
        ) WITHOUT ROWID;
        -- "who is this memory about" for the hits of a search or a page of a list.
        CREATE INDEX memory_people_memory ON memory_people (memory_rowid);
        """
    )
