"""Erasing everything the store holds about one user on PostgreSQL, at once.

The same rules as the SQLite engine, in one transaction:

* every personal memory of the user, in every state, with its vectors, jobs, attribute keys
  and people links, and every episode of theirs (their own, and messages they wrote that
  others observed);
* with ``include_group``, the group memories the user added too; without it they stay with
  their chat but lose everything naming the user (owner ``ERASED``, speaker fields cleared);
* the speaker fields of group memories others stored from the user's words;
* the user's people, observed messages, sessions and extraction jobs;
* the audit trail of every erased memory, and the user's name as the actor of other events.

The audit trail then keeps one ``erased`` event: when, by whom, and the counts.

The rows are removed by DELETE; PostgreSQL keeps the old row versions as dead tuples until
VACUUM reclaims them, so the caller vacuums the touched tables afterwards (``vacuum``).  What
the server wrote to its WAL, its archive and its backups before that is outside memoryd's
reach (docs/postgres.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg

from memoryd.store import erasure_log
from memoryd.store.admin_records import ERASURE_KINDS as KINDS
from memoryd.store.erasure_log import GROUP_ERASED, ErasureLog
from memoryd.store.maintenance_rules import ERASED, spoken_names
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres import notices
from memoryd.store.postgres.people.people import lock_owner
from memoryd.store.postgres.scope_lock import lock_scope
from memoryd.store.visibility import personal_key

Conn = psycopg.Connection[Any]

#: The ``meta`` key of the erasure log: the daemons learn of erasures by notice, but a fact
#: write checks it (``erasure_mark``).
ERASURE_LOG = "erasure_log"

#: The tables an erasure deletes from or rewrites (vacuumed after it).
TOUCHED = (
    "memories",
    "memory_vectors",
    "memory_attributes",
    "memory_people",
    "jobs",
    "people",
    "observed_messages",
    "extraction_jobs",
    "audit_events",
)


def erase_user(
    conn: Conn,
    user_id: str,
    now_ms: int,
    *,
    actor: str,
    include_group: bool = False,
    usernames: Sequence[str] = (),
    dry_run: bool = False,
) -> dict[str, int]:
    """Erase ``user_id``'s data (see the module docstring); counts per kind.  ``dry_run``
    counts without changing anything."""
    counts: Counter[str] = Counter({kind: 0 for kind in KINDS})
    # Facts extracted from a request's messages (memory.extract_from_messages) are stored under
    # this lock, after checking the log below: they commit before the erasure reads what to
    # erase, or see its entry and are not stored.
    lock_scope(conn, personal_key(user_id))
    # Then the lock of the user's people (every change to them takes it: learning, merges,
    # aliases, forget_person), in the order an add takes the two: the erasure deletes their
    # people and the links to them, which such a change holds while it goes on to memories the
    # erasure has locked or anonymises.
    lock_owner(conn, user_id)
    personal = _rowids(
        conn,
        "SELECT rowid FROM memories WHERE owner = %s AND NOT shared AND memory_type IS DISTINCT FROM 'episode'",
        (user_id,),
    )
    group = _rowids(conn, "SELECT rowid FROM memories WHERE owner = %s AND shared", (user_id,))
    names = _usernames(conn, user_id, usernames)
    episodes = _rowids(
        conn,
        "SELECT rowid FROM memories WHERE memory_type = 'episode' AND (owner = %s "
        "OR (metadata::jsonb)->>'author_user_id' = %s OR source_username = ANY(%s))",
        (user_id, user_id, names),
    )
    doomed = personal + episodes + (group if include_group else [])
    sessions = [
        str(row[0])
        for row in conn.execute(
            "SELECT session FROM extraction_jobs WHERE owner = %s UNION "
            "SELECT DISTINCT session FROM observed_messages WHERE (session::jsonb)->>0 = %s",
            (user_id, user_id),
        )
    ]
    counts["memories"] = len(personal)
    counts["episodes"] = len(episodes)
    counts["group_memories_deleted"] = len(group) if include_group else 0
    counts["people"] = _count(conn, "SELECT count(*) FROM people WHERE owner = %s", (user_id,))
    counts["sessions"] = len(sessions)
    counts["messages"] = _count(
        conn,
        "SELECT count(*) FROM observed_messages WHERE session = ANY(%s) OR author_user_id = %s",
        (sessions, user_id),
    )
    counts["jobs"] = _count(conn, "SELECT count(*) FROM jobs WHERE memory_rowid = ANY(%s)", (doomed,))
    if rows.vector_generation(conn) is not None:
        counts["vectors"] = _count(conn, "SELECT count(*) FROM memory_vectors WHERE rowid = ANY(%s)", (doomed,))
    doomed_ids = [str(row[0]) for row in conn.execute("SELECT id FROM memories WHERE rowid = ANY(%s)", (doomed,))]
    counts["audit_events"] = _count(conn, "SELECT count(*) FROM audit_events WHERE memory_id = ANY(%s)", (doomed_ids,))
    anonymised = _rowids(
        conn,
        "SELECT rowid FROM memories WHERE shared AND ((%s AND owner = %s) OR source_username = ANY(%s))",
        (not include_group, user_id, names),
    )
    counts["group_memories_anonymised"] = len(anonymised)
    if dry_run:
        return dict(counts)

    if doomed:
        # The rows first, in rowid order, and only then what hangs off them (vectors, jobs,
        # links): the order a purge, an eviction and a delete take them in.  Deleting a job
        # first and then waiting for a memory that a purge holds, while the purge waits for
        # that job, is a deadlock.
        conn.execute("SELECT 1 FROM memories WHERE rowid = ANY(%s) ORDER BY rowid FOR UPDATE", (doomed,))
        rows.drop_derived(conn, doomed)
        for table in ("memory_attributes", "memory_people"):
            conn.execute(f"DELETE FROM {table} WHERE memory_rowid = ANY(%s)", (doomed,))  # our own names
        conn.execute("DELETE FROM memories WHERE rowid = ANY(%s)", (doomed,))
        conn.execute("DELETE FROM audit_events WHERE memory_id = ANY(%s)", (doomed_ids,))
    conn.execute(
        "DELETE FROM memory_people WHERE person_rowid IN (SELECT rowid FROM people WHERE owner = %s)", (user_id,)
    )
    conn.execute("DELETE FROM people WHERE owner = %s", (user_id,))
    conn.execute("DELETE FROM observed_messages WHERE session = ANY(%s) OR author_user_id = %s", (sessions, user_id))
    conn.execute("DELETE FROM extraction_jobs WHERE owner = %s", (user_id,))
    if anonymised:
        conn.execute(
            "UPDATE memories SET owner = CASE WHEN owner = %s THEN %s ELSE owner END, source_username = NULL, "
            "source_display_name = NULL, source_message_id = NULL WHERE rowid = ANY(%s)",
            (user_id, ERASED, anonymised),
        )
    conn.execute("UPDATE audit_events SET actor = %s WHERE actor = %s", (ERASED, user_id))
    rows.audit(conn, personal_key(ERASED), "", "erased", actor, now_ms, {kind: counts[kind] for kind in KINDS})
    # Every daemon (this one too) drops the user's cached summaries and people once it commits,
    # and every cached summary of a group chat when group memories went (other members'
    # summaries were built from them).
    # The log (``store/erasure_log.py``), one ``meta`` value that erasures update in turn.
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (ERASURE_LOG,))
    row = conn.execute("SELECT value FROM meta WHERE key = %s", (ERASURE_LOG,)).fetchone()
    appended = erasure_log.append(
        None if row is None else row[0], user_id, group=bool(counts["group_memories_deleted"])
    )
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (ERASURE_LOG, appended),
    )
    notices.send(conn, notices.CHANGES, personal_key(user_id))
    notices.send(conn, notices.CHANGES, f"erased:{user_id}")
    if counts["group_memories_deleted"]:
        notices.send(conn, notices.CHANGES, GROUP_ERASED)
    return dict(counts)


def vacuum(conn: Conn) -> None:
    """After an erasure (on an autocommit connection): VACUUM the touched tables, so the erased
    rows' dead versions are reclaimed now rather than whenever autovacuum comes by.  Without
    statement_timeout: a big table's VACUUM takes longer, and it holds no lock a daemon waits for."""
    conn.execute("SET statement_timeout = 0")
    for table in TOUCHED:
        conn.execute(f"VACUUM {table}")  # our own names


def _usernames(conn: Conn, user_id: str, extra: Sequence[str]) -> list[str]:
    """The usernames the user spoke under: given, and recorded for their sessions and messages."""
    recorded = conn.execute(
        "SELECT speaker_username FROM extraction_jobs WHERE owner = %s AND speaker_username IS NOT NULL "
        "UNION SELECT username FROM observed_messages WHERE author_user_id = %s AND username IS NOT NULL",
        (user_id, user_id),
    )
    return spoken_names(extra, (name for (name,) in recorded))


def _rowids(conn: Conn, query: str, params: tuple[Any, ...]) -> list[int]:
    return [int(row[0]) for row in conn.execute(query, params)]


def _count(conn: Conn, query: str, params: tuple[Any, ...]) -> int:
    row = conn.execute(query, params).fetchone()
    return 0 if row is None else int(row[0])


def erasure_mark(conn: Conn) -> ErasureLog | None:
    row = conn.execute("SELECT value FROM meta WHERE key = %s", (ERASURE_LOG,)).fetchone()
    return erasure_log.read(None if row is None else row[0])
