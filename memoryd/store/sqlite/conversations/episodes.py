"""Episodes: each observed message, kept as a searchable memory of type ``episode``.

An episode is an ordinary row of ``memories`` (so search, visibility and the disclosure rules
treat it as every memory): the caller's personal memory, learned in the chat it was observed
in, with the chat type, speaker, message id and session as its provenance and the role and
the caller's timestamp in its metadata.  Its content is the message as said (credentials
redacted), prefixed with who said it ("Caroline: ..."), so a search for a person finds what they said.

Episodes are inserted without dedupe (a repeated message is a second episode), never run
through supersession or people learning, do not count towards max_entries, and are removed
``[episodes] retention_days`` after they were observed (``prune_batch``).
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from memoryd.store.conversation_records import SessionContext, SessionRef, StoredMessage
from memoryd.store.episode_records import episode_of
from memoryd.store.sqlite.memories import memories

#: Episodes removed per write transaction by the retention pass.
PRUNE_BATCH = 500


def add(
    db: apsw.Connection, session: SessionRef, context: SessionContext, messages: Sequence[StoredMessage], now_ms: int
) -> int:
    """Store one episode per message (in the observe's transaction); returns how many."""
    for message in messages:
        memories.insert(db, episode_of(session, context, message), now_ms)
    return len(messages)


def prune_batch(db: apsw.Connection, cutoff_ms: int, limit: int = PRUNE_BATCH) -> int:
    """Hard-remove up to ``limit`` episodes observed before ``cutoff_ms`` (pinned ones stay)."""
    rowids = [
        int(row[0])
        for row in db.execute(
            "SELECT rowid FROM memories INDEXED BY memories_episodes "
            "WHERE memory_type = 'episode' AND created_at_ms < ? AND pinned = 0 LIMIT ?",
            (cutoff_ms, limit),
        )
    ]
    if not rowids:
        return 0
    memories.drop_derived(db, rowids)
    db.executemany("DELETE FROM memories WHERE rowid = ?", [(rowid,) for rowid in rowids])
    return len(rowids)
