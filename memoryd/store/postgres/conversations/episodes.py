"""Episodes on PostgreSQL: each observed message kept as a searchable memory of type
``episode`` (built by ``episode_records.episode_of``), and their retention."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from memoryd.store.conversation_records import (
    SessionContext,
    SessionRef,
    StoredMessage,
)
from memoryd.store.episode_records import episode_of
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows
from memoryd.store.visibility import personal_key

Conn = psycopg.Connection[Any]
PRUNE_BATCH = 5000


def add(
    conn: Conn, session: SessionRef, context: SessionContext, messages: Sequence[StoredMessage], now_ms: int
) -> None:
    # Each message also as a searchable memory of type episode, in this transaction.
    for message in messages:
        rows.insert(conn, episode_of(session, context, message), now_ms)
    job_rows.notify(conn, changed=personal_key(session.owner))


def prune_batch(conn: Conn, cutoff_ms: int) -> int:
    """Hard-remove up to ``PRUNE_BATCH`` episodes observed before ``cutoff_ms`` (pinned ones stay)."""
    doomed = [
        int(row[0])
        for row in conn.execute(
            "SELECT rowid FROM memories WHERE memory_type = 'episode' AND created_at_ms < %s AND NOT pinned "
            "LIMIT %s FOR UPDATE SKIP LOCKED",
            (cutoff_ms, PRUNE_BATCH),
        )
    ]
    if doomed:
        rows.drop_derived(conn, doomed)
        conn.execute("DELETE FROM memory_people WHERE memory_rowid = ANY(%s)", (doomed,))
        conn.execute("DELETE FROM memories WHERE rowid = ANY(%s)", (doomed,))
    return len(doomed)
