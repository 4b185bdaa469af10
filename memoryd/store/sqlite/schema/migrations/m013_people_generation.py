"""Schema step 013: a generation number per owner's people, bumped by triggers on every change.

Resolving a new memory's subjects against the owner's people needs them indexed by name and
alias; building that index costs a pass over all of them, so the writer keeps it between adds and
rebuilds it only when this number moved other than by its own hand (an import, a merge, a
rename: any write to ``people``, whoever makes it)."""

from __future__ import annotations

import apsw

# A random number, not a count: a generation a rolled-back transaction wrote may be cached,
# and no later change may come back to it.
_BUMP = (
    "INSERT INTO people_generation (owner, generation) VALUES ({who}.owner, random()) "
    "ON CONFLICT (owner) DO UPDATE SET generation = random();"
)


def m013_people_generation(db: apsw.Connection) -> None:
    """Idempotent (IF NOT EXISTS): a store whose version was set back runs it again."""
    db.execute(
        f"""
        CREATE TABLE IF NOT EXISTS people_generation (
            owner TEXT PRIMARY KEY,
            generation INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT OR IGNORE INTO people_generation (owner, generation) SELECT owner, random() FROM people WHERE true GROUP BY owner;
        CREATE TRIGGER IF NOT EXISTS people_generation_insert AFTER INSERT ON people BEGIN {_BUMP.format(who="NEW")} END;
        CREATE TRIGGER IF NOT EXISTS people_generation_delete AFTER DELETE ON people BEGIN {_BUMP.format(who="OLD")} END;
        CREATE TRIGGER IF NOT EXISTS people_generation_update AFTER UPDATE ON people BEGIN
            {_BUMP.format(who="OLD")} {_BUMP.format(who="NEW")}
        END;
        """
    )
