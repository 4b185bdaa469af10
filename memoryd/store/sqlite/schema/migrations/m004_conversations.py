"""Schema step 004: observed conversation messages and one extraction job per session."""

from __future__ import annotations

import apsw


def m004_conversations(db: apsw.Connection) -> None:
    """Observed conversation messages and one extraction job per session.

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
