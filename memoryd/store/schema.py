"""Schema migrations: a ``pragma user_version`` ladder of numbered steps.

Each step runs in its own write transaction and bumps user_version, so a crash between steps
leaves the database at a well-defined version.  Append new steps; never edit an old one.

Vector tables are not created here: there is one vec0 table per embedding generation, created
when a vector space is configured (see ``vectors.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from memoryd.errors import StoreError
from memoryd.store import vectors
from memoryd.store.db import write_transaction
from memoryd.store.visibility import DISCLOSURE_SQL


def m001_create_tables(db: apsw.Connection) -> None:
    db.execute(
        """
        CREATE TABLE memories (
            rowid INTEGER PRIMARY KEY,          -- stable: FTS and vec0 rows point at it
            id TEXT NOT NULL UNIQUE,            -- ULID
            content TEXT NOT NULL,
            owner TEXT NOT NULL,
            chat_id TEXT,
            shared INTEGER NOT NULL CHECK (shared IN (0, 1)),
            scope_key TEXT NOT NULL,            -- 'u:<owner>' (personal) or 'c:<chat_id>' (group)
            source TEXT NOT NULL,
            subjects TEXT NOT NULL,             -- JSON array of strings
            created_at_ms INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL,
            expires_at_ms INTEGER,
            deleted_at_ms INTEGER,
            confidence REAL NOT NULL,
            metadata TEXT NOT NULL,             -- JSON object
            content_hash TEXT NOT NULL,
            vector_gen INTEGER,                 -- generation whose vec table holds our vector
            -- The scope as ONE FTS token (hex of the key): the keyword query ANDs it with the
            -- terms, so FTS itself only walks the caller's documents.
            scope_token TEXT GENERATED ALWAYS AS (hex(scope_key)) VIRTUAL,
            CHECK (shared = 0 OR chat_id IS NOT NULL)
        );

        -- list (newest first), prefix delete, short ids: the visible (= not deleted) ids of a scope.
        CREATE INDEX memories_scope_id ON memories (scope_key, id) WHERE deleted_at_ms IS NULL;
        CREATE INDEX memories_dedupe ON memories (scope_key, content_hash) WHERE deleted_at_ms IS NULL;
        -- health counts without reading the content pages.
        CREATE INDEX memories_health ON memories (owner, deleted_at_ms, expires_at_ms);

        CREATE VIRTUAL TABLE memories_fts USING fts5 (
            content, subjects, scope_token,
            content = 'memories', content_rowid = 'rowid',
            -- porter: "likes" finds "like"; it stems the query the same way.
            tokenize = 'porter unicode61 remove_diacritics 2'
        );

        -- Only live memories are in the FTS index; a soft delete takes the row out.
        CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories
        WHEN new.deleted_at_ms IS NULL BEGIN
            INSERT INTO memories_fts (rowid, content, subjects, scope_token)
            VALUES (new.rowid, new.content, new.subjects, new.scope_token);
        END;

        CREATE TRIGGER memories_fts_unindex AFTER UPDATE ON memories
        WHEN old.deleted_at_ms IS NULL AND (
            new.deleted_at_ms IS NOT NULL OR old.content IS NOT new.content
            OR old.subjects IS NOT new.subjects OR old.scope_key IS NOT new.scope_key) BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, content, subjects, scope_token)
            VALUES ('delete', old.rowid, old.content, old.subjects, old.scope_token);
        END;

        CREATE TRIGGER memories_fts_reindex AFTER UPDATE ON memories
        WHEN new.deleted_at_ms IS NULL AND (
            old.deleted_at_ms IS NOT NULL OR old.content IS NOT new.content
            OR old.subjects IS NOT new.subjects OR old.scope_key IS NOT new.scope_key) BEGIN
            INSERT INTO memories_fts (rowid, content, subjects, scope_token)
            VALUES (new.rowid, new.content, new.subjects, new.scope_token);
        END;

        CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories
        WHEN old.deleted_at_ms IS NULL BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, content, subjects, scope_token)
            VALUES ('delete', old.rowid, old.content, old.subjects, old.scope_token);
        END;

        -- Audit trail: ids and actors only, never memory contents.
        CREATE TABLE events (
            event_id INTEGER PRIMARY KEY,
            memory_id TEXT NOT NULL,
            event TEXT NOT NULL,                -- added / deleted / ...
            actor TEXT,
            at_ms INTEGER NOT NULL,
            detail TEXT NOT NULL DEFAULT '{}'   -- JSON object
        );
        CREATE INDEX events_memory ON events (memory_id, at_ms);

        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT
        ) WITHOUT ROWID;

        -- Durable background work; one pending job per (kind, memory).
        CREATE TABLE jobs (
            job_id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            memory_rowid INTEGER NOT NULL REFERENCES memories (rowid) ON DELETE CASCADE,
            attempts INTEGER NOT NULL DEFAULT 0,
            due_at_ms INTEGER NOT NULL,
            leased_until_ms INTEGER,            -- claimed by a worker until then
            created_at_ms INTEGER NOT NULL,
            last_error TEXT,
            UNIQUE (kind, memory_rowid)
        );
        CREATE INDEX jobs_due ON jobs (kind, due_at_ms);
        """
    )


def m002_lifecycle(db: apsw.Connection) -> None:
    """Columns and indexes for the lifecycle: access recording, expiry marking, gc."""
    db.execute(
        """
        -- Search and list hits, flushed in batches (see access.py); eviction prefers the unused.
        ALTER TABLE memories ADD COLUMN access_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE memories ADD COLUMN last_access_ms INTEGER;
        -- When maintenance audited the expiry ('expired' event), so it is audited once.
        ALTER TABLE memories ADD COLUMN expiry_recorded_ms INTEGER;
        -- Id of the memory that replaces this one.  Nothing sets it yet (no update method);
        -- stats count it as its own state and export carries it, so the format stays lossless.
        ALTER TABLE memories ADD COLUMN superseded_by TEXT;

        -- gc: memories deleted or expired before the retention cut-off, found by range scans.
        CREATE INDEX memories_gc_deleted ON memories (deleted_at_ms) WHERE deleted_at_ms IS NOT NULL;
        CREATE INDEX memories_gc_expired ON memories (expires_at_ms) WHERE expires_at_ms IS NOT NULL;
        -- gc prunes the audit trail of memories purged one retention period ago.
        CREATE INDEX events_purged ON events (at_ms) WHERE event = 'purged';
        """
    )


def m003_provenance(db: apsw.Connection) -> None:
    """Where a memory was learned and how it may be disclosed (see ``records.Provenance``).

    NULL means unknown: memories from before this version have no provenance, and the
    disclosure rules treat unknown as "learned in a private chat" (fail closed).
    """
    db.execute(
        """
        ALTER TABLE memories ADD COLUMN chat_type TEXT;
        ALTER TABLE memories ADD COLUMN source_username TEXT;
        ALTER TABLE memories ADD COLUMN source_display_name TEXT;
        ALTER TABLE memories ADD COLUMN source_message_id TEXT;
        ALTER TABLE memories ADD COLUMN source_session TEXT;
        ALTER TABLE memories ADD COLUMN sensitivity TEXT
            CHECK (sensitivity IS NULL OR sensitivity IN ('public', 'personal', 'sensitive'));
        ALTER TABLE memories ADD COLUMN memory_type TEXT;
        ALTER TABLE memories ADD COLUMN conversation_private INTEGER NOT NULL DEFAULT 0
            CHECK (conversation_private IN (0, 1));
        """
    )


def m004_conversations(db: apsw.Connection) -> None:
    """Observed conversation messages and one extraction job per session (issue 10).

    Extraction jobs are not rows of ``jobs`` (whose ``memory_rowid`` is NOT NULL): a job belongs
    to a conversation, is rescheduled by every new message (the debounce) and carries the
    session's high-water mark, so it lives beside its messages.
    """
    db.execute(
        """
        -- Messages posted by memory.observe; never logged, pruned after extraction.retention_days.
        CREATE TABLE observed_messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, -- arrival order, never reused: the high-water mark compares it
            session TEXT NOT NULL,              -- extraction_jobs.session
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            content TEXT NOT NULL,
            message_id TEXT,
            sent_at TEXT,                       -- the caller's timestamp, as JSON (ISO text or epoch)
            username TEXT,
            display_name TEXT,
            author_user_id TEXT,
            received_at_ms INTEGER NOT NULL
        );
        CREATE INDEX observed_session ON observed_messages (session, seq);
        CREATE INDEX observed_received ON observed_messages (received_at_ms);
        -- memory.extract finds the message it is asked about by the caller's id.
        CREATE INDEX observed_message_id ON observed_messages (message_id) WHERE message_id IS NOT NULL;

        -- One per session (owner, chat, session key).  due_at_ms NULL: nothing left to extract.
        CREATE TABLE extraction_jobs (
            session TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            chat_id TEXT,
            session_key TEXT,
            chat_type TEXT,
            timezone TEXT,
            speaker_username TEXT,
            speaker_display_name TEXT,
            done_seq INTEGER NOT NULL DEFAULT 0, -- messages up to this seq were extracted
            due_at_ms INTEGER,
            leased_until_ms INTEGER,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            parked_at_ms INTEGER,               -- gave up after max_attempts; `memoryd jobs retry`
            updated_at_ms INTEGER NOT NULL
        );
        CREATE INDEX extraction_jobs_due ON extraction_jobs (due_at_ms) WHERE due_at_ms IS NOT NULL;
        """
    )


def m005_supersession(db: apsw.Connection) -> None:
    """Supersession (see ``supersession.py``): when and why a memory was replaced, the caller's
    upsert key, and the attribute keys the offline rules compare.

    A superseded memory keeps its row and FTS entry (audit, ``include_superseded``) but loses its
    vector, so the vec0 scan is never crowded by outdated memories.
    """
    db.execute(
        """
        ALTER TABLE memories ADD COLUMN superseded_at_ms INTEGER;
        ALTER TABLE memories ADD COLUMN supersede_reason TEXT;
        -- navi's (category, key) upsert: same key, subjects and scope, newer wins.
        ALTER TABLE memories ADD COLUMN key TEXT;

        -- history walks the chain both ways: "who replaced X" is X.superseded_by, "whom did X
        -- replace" needs this index.
        CREATE INDEX memories_superseded_by ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
        -- gc of superseded memories past retention.
        CREATE INDEX memories_gc_superseded ON memories (superseded_at_ms) WHERE superseded_at_ms IS NOT NULL;
        CREATE INDEX memories_key ON memories (scope_key, key)
            WHERE key IS NOT NULL AND deleted_at_ms IS NULL AND superseded_by IS NULL;

        -- The attribute keys a memory sets (knowledge.attributes: "favorite:color", "employer"),
        -- so the offline candidates of a new memory are one index range per key.
        CREATE TABLE memory_attributes (
            scope_key TEXT NOT NULL,
            attribute TEXT NOT NULL,
            memory_rowid INTEGER NOT NULL REFERENCES memories (rowid) ON DELETE CASCADE,
            PRIMARY KEY (scope_key, attribute, memory_rowid)
        ) WITHOUT ROWID;
        CREATE INDEX memory_attributes_memory ON memory_attributes (memory_rowid);
        """
    )


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


def m007_disclosure_and_time_order(db: apsw.Connection) -> None:
    """Ids no longer sort by time (they are random, see ``ids.py``), so lists walk a time index;
    the disclosure rules read one generated code per memory (``visibility.Disclosure``), which
    the vector table stores too, so its scan can filter by it (the table is rebuilt in place)."""
    db.execute(
        f"""
        ALTER TABLE memories ADD COLUMN disclosure INTEGER GENERATED ALWAYS AS ({DISCLOSURE_SQL}) VIRTUAL;
        -- list (newest first) and its cursor: one ordered walk per scope key.
        CREATE INDEX memories_scope_time ON memories (scope_key, created_at_ms, rowid) WHERE deleted_at_ms IS NULL;
        """
    )
    space = vectors.read_space(db)
    if space is not None:
        vectors.rebuild_table(db, space)


def m008_int8_rescoring_copies(db: apsw.Connection) -> None:
    """The vector table's rescoring copies become int8 (``dim`` bytes) instead of float16
    (``2 * dim``): at a million memories they were half of the file (``vector_codec.py``).
    The table is rewritten, so its pages are packed; the pages it leaves are free for reuse."""
    space = vectors.read_space(db)
    if space is not None:
        vectors.rebuild_table(db, space)


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
