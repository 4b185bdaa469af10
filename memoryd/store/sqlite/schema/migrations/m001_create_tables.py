"""Schema step 001: the first tables: memories, their FTS index, events, meta, jobs."""

from __future__ import annotations

import apsw


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
