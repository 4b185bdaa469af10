"""Schema migrations: a ``pragma user_version`` ladder of numbered steps.

Each step runs in its own write transaction and bumps user_version, so a crash between steps
leaves the database at a well-defined version.  Append new steps; never edit an old one.

The steps live in ``migrations/``, one module each (``m001_create_tables.py`` ...), and are keyed
here by their number: step N leaves the database at user_version N.  The numbers are the steps'
own, not their positions, so a step keeps its number whatever else is registered.
Vector tables are not created by them: there is one vec0 table per embedding generation, created
when a vector space is configured (see ``vectors/vectors.py``); ``vector_copies`` (m014) holds the
copies of the current generation's vectors that the searches read.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from memoryd.errors import StoreError
from memoryd.store.sqlite.db.database import write_transaction
from memoryd.store.sqlite.schema.migrations.m001_create_tables import m001_create_tables
from memoryd.store.sqlite.schema.migrations.m002_lifecycle import m002_lifecycle
from memoryd.store.sqlite.schema.migrations.m003_provenance import m003_provenance
from memoryd.store.sqlite.schema.migrations.m004_conversations import m004_conversations
from memoryd.store.sqlite.schema.migrations.m005_supersession import m005_supersession
from memoryd.store.sqlite.schema.migrations.m006_people import m006_people
from memoryd.store.sqlite.schema.migrations.m007_disclosure_and_time_order import m007_disclosure_and_time_order
from memoryd.store.sqlite.schema.migrations.m008_int8_rescoring_copies import m008_int8_rescoring_copies
from memoryd.store.sqlite.schema.migrations.m009_vector_epochs import m009_vector_epochs
from memoryd.store.sqlite.schema.migrations.m010_binary_content_hash import m010_binary_content_hash
from memoryd.store.sqlite.schema.migrations.m011_added_events_from_rows import m011_added_events_from_rows
from memoryd.store.sqlite.schema.migrations.m012_six_bit_rescoring_copies import m012_six_bit_rescoring_copies
from memoryd.store.sqlite.schema.migrations.m013_people_generation import m013_people_generation
from memoryd.store.sqlite.schema.migrations.m014_owned_vector_copies import m014_owned_vector_copies
from memoryd.store.sqlite.schema.migrations.m015_pins_and_erasure import m015_pins_and_erasure
from memoryd.store.sqlite.schema.migrations.m016_memory_rowids_never_reused import m016_memory_rowids_never_reused

Step = Callable[[apsw.Connection], None]

#: The ladder, by step number: step N brings user_version to N from the step before it.
MIGRATIONS: dict[int, Step] = {
    1: m001_create_tables,
    2: m002_lifecycle,
    3: m003_provenance,
    4: m004_conversations,
    5: m005_supersession,
    6: m006_people,
    7: m007_disclosure_and_time_order,
    8: m008_int8_rescoring_copies,
    9: m009_vector_epochs,
    10: m010_binary_content_hash,
    11: m011_added_events_from_rows,
    12: m012_six_bit_rescoring_copies,
    13: m013_people_generation,
    14: m014_owned_vector_copies,
    15: m015_pins_and_erasure,
    16: m016_memory_rowids_never_reused,
}

#: The user_version of a database that has taken every step.
LATEST = max(MIGRATIONS)


def version_before(step: Step) -> int:
    """The user_version a database has just before ``step`` runs (the number of the step
    registered before it); tests set it to replay one step on an older store."""
    number = next(n for n, registered in MIGRATIONS.items() if registered is step)
    return max((n for n in MIGRATIONS if n < number), default=0)


def schema_version(db: apsw.Connection) -> int:
    return int(db.pragma("user_version"))


def migrate(db: apsw.Connection) -> int:
    """Bring the database up to the newest version; returns that version."""
    current = schema_version(db)
    if current > LATEST:
        raise StoreError(
            f"database schema version {current} is newer than this memoryd (knows up to {LATEST}); upgrade memoryd"
        )
    for version in sorted(n for n in MIGRATIONS if n > current):
        with write_transaction(db):
            MIGRATIONS[version](db)
            db.pragma("user_version", version)
    return LATEST
