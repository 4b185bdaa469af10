"""Schema migrations: a ``pragma user_version`` ladder of numbered steps.

Each step runs in its own write transaction and bumps user_version, so a crash between steps
leaves the database at a well-defined version.  Append new steps; never edit an old one.

The steps live in ``migrations/``, one module each (``m001_create_tables.py`` ...).
Vector tables are not created by them: there is one vec0 table per embedding generation, created
when a vector space is configured (see ``vectors.py``).
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

#: The ladder: step N brings user_version from N-1 to N.
MIGRATIONS: list[Callable[[apsw.Connection], None]] = [
    m001_create_tables,
    m002_lifecycle,
    m003_provenance,
    m004_conversations,
    m005_supersession,
    m006_people,
    m007_disclosure_and_time_order,
    m008_int8_rescoring_copies,
    m009_vector_epochs,
    m010_binary_content_hash,
    m011_added_events_from_rows,
    m012_six_bit_rescoring_copies,
    m013_people_generation,
]


def schema_version(db: apsw.Connection) -> int:
    return int(db.pragma("user_version"))


def migrate(db: apsw.Connection) -> int:
    """Bring the database up to the newest version; returns that version."""
    current = schema_version(db)
    if current > len(MIGRATIONS):
        raise StoreError(
            f"database schema version {current} is newer than this memoryd "
            f"(knows up to {len(MIGRATIONS)}); upgrade memoryd"
        )
    for version in range(current + 1, len(MIGRATIONS) + 1):
        with write_transaction(db):
            MIGRATIONS[version - 1](db)
            db.pragma("user_version", version)
    return len(MIGRATIONS)
