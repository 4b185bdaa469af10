"""Erasing everything the store holds about one user, physically and at once.

What goes (``erase_user``), in one write transaction:

* every personal memory of the user, in every state (live, expired, deleted, superseded
  versions), with its FTS entry, vectors, jobs, attribute keys and people links;
* with ``include_group``, the group memories the user added too;  without it they stay with
  their chat (the other members rely on them) but lose everything naming the user: the owner
  becomes ``ERASED`` and the speaker fields are cleared;
* the speaker fields of group memories others stored from the user's words (matched by the
  usernames the user spoke under);
* the user's people; their observed conversation messages (their sessions, and messages they
  wrote in others' sessions) and extraction jobs;
* the audit trail of every erased memory; the user's name as the actor of other events.

The audit trail then keeps one ``erased`` event: when, by whom, and the counts.

The writer connection runs with ``PRAGMA secure_delete`` (``sqlite/db/connection.open_connection``), so
freed cells and pages are zeroed, and the FTS index has its ``secure-delete`` option (schema
m015); the caller then checkpoints with TRUNCATE, which empties the WAL that held the old pages.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import apsw
import msgspec

from memoryd.store import erasure_log
from memoryd.store.admin_records import ERASURE_KINDS as KINDS
from memoryd.store.erasure_log import ErasureLog
from memoryd.store.maintenance_rules import ERASED, spoken_names
from memoryd.store.sqlite.db import meta
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.memories import memories
from memoryd.store.sqlite.vectors import vectors

#: The ``meta`` key of the erasure log (``store/erasure_log.py``): whom the recent erasures were about.
ERASURE_LOG = "erasure_log"


def erase_user(
    db: apsw.Connection,
    user_id: str,
    now_ms: int,
    *,
    actor: str,
    include_group: bool = False,
    usernames: Sequence[str] = (),
    dry_run: bool = False,
) -> dict[str, int]:
    """Erase ``user_id``'s data (see the module docstring); returns counts per kind.

    ``usernames``: names the user speaks under besides those the store recorded for them.
    ``dry_run`` counts without changing anything (the caller rolls nothing back: nothing is
    written)."""
    counts: Counter[str] = Counter({kind: 0 for kind in KINDS})
    personal = _rowids(
        db, "SELECT rowid FROM memories WHERE owner = ? AND shared = 0 AND memory_type IS NOT 'episode'", (user_id,)
    )
    group = _rowids(db, "SELECT rowid FROM memories WHERE owner = ? AND shared = 1", (user_id,))
    names = _usernames(db, user_id, usernames)
    # Episodes: the user's own, and the messages they wrote that others observed (their words).
    episodes = _rowids(
        db,
        "SELECT rowid FROM memories INDEXED BY memories_episodes WHERE memory_type = 'episode' AND created_at_ms > -1 "
        "AND (owner = ?1 OR json_extract(metadata, '$.author_user_id') = ?1 "
        "OR source_username IN (SELECT value FROM json_each(?2)))",
        (user_id, _json(names)),
    )
    doomed = personal + episodes + (group if include_group else [])
    # A session's key is the JSON array [owner, chat_id, session_key] (``conversations.SessionRef``).
    sessions = [
        str(row[0])
        for row in db.execute(
            "SELECT session FROM extraction_jobs WHERE owner = ?1 UNION "
            "SELECT DISTINCT session FROM observed_messages WHERE json_extract(session, '$[0]') = ?1",
            (user_id,),
        )
    ]
    counts["memories"] = len(personal)
    counts["episodes"] = len(episodes)
    counts["group_memories_deleted"] = len(group) if include_group else 0
    counts["people"] = _count(db, "SELECT count(*) FROM people WHERE owner = ?", (user_id,))
    counts["sessions"] = len(sessions)
    counts["messages"] = _count(
        db,
        "SELECT count(*) FROM observed_messages WHERE session IN (SELECT value FROM json_each(?)) "
        "OR author_user_id = ?",
        (_json(sessions), user_id),
    )
    counts["jobs"] = _count(
        db, "SELECT count(*) FROM jobs WHERE memory_rowid IN (SELECT value FROM json_each(?))", (_json(doomed),)
    )
    space = vectors.read_space(db)
    if space is not None:
        counts["vectors"] = _count(
            db,
            f"SELECT count(*) FROM {space.table} WHERE memory_rowid IN (SELECT value FROM json_each(?))",
            (_json(doomed),),
        )
    doomed_ids = [
        str(row[0])
        for row in db.execute(
            "SELECT id FROM memories WHERE rowid IN (SELECT value FROM json_each(?))", (_json(doomed),)
        )
    ]
    counts["audit_events"] = _count(
        db,
        "SELECT count(*) FROM audit_events WHERE memory_id IN (SELECT value FROM json_each(?))",
        (_json(doomed_ids),),
    )
    anonymised = _rowids(db, *_anonymise_query(user_id, names, include_group))
    counts["group_memories_anonymised"] = len(anonymised)
    if dry_run:
        return dict(counts)

    if doomed:
        memories.drop_derived(db, doomed)
        jobs.drop_jobs_of(db, doomed)
        for table in ("memory_attributes", "memory_people"):
            db.execute(f"DELETE FROM {table} WHERE memory_rowid IN (SELECT value FROM json_each(?))", (_json(doomed),))
        db.execute("DELETE FROM memories WHERE rowid IN (SELECT value FROM json_each(?))", (_json(doomed),))
        db.execute("DELETE FROM audit_events WHERE memory_id IN (SELECT value FROM json_each(?))", (_json(doomed_ids),))
    db.execute("DELETE FROM memory_people WHERE person_rowid IN (SELECT rowid FROM people WHERE owner = ?)", (user_id,))
    db.execute("DELETE FROM people WHERE owner = ?", (user_id,))
    db.execute(
        "DELETE FROM observed_messages WHERE session IN (SELECT value FROM json_each(?)) OR author_user_id = ?",
        (_json(sessions), user_id),
    )
    db.execute("DELETE FROM extraction_jobs WHERE owner = ?", (user_id,))
    if anonymised:
        db.execute(
            "UPDATE memories SET owner = CASE WHEN owner = ? THEN ? ELSE owner END, source_username = NULL, "
            "source_display_name = NULL, source_message_id = NULL WHERE rowid IN (SELECT value FROM json_each(?))",
            (user_id, ERASED, _json(anonymised)),
        )
    db.execute("UPDATE audit_events SET actor = ? WHERE actor = ?", (ERASED, user_id))
    memories.audit(db, "", "erased", actor, now_ms, {kind: counts[kind] for kind in KINDS})
    # Daemons running beside this process read it at their next context or summary and drop
    # this user's caches (``PeopleStore.erasure_mark``), and every cached summary of a group
    # chat when group memories went (other members' summaries were built from them).
    log = erasure_log.append(meta.get(db, ERASURE_LOG), user_id, group=bool(counts["group_memories_deleted"]))
    meta.put(db, ERASURE_LOG, log)
    return dict(counts)


def erasure_mark(db: apsw.Connection) -> ErasureLog | None:
    return erasure_log.read(meta.get(db, ERASURE_LOG))


def _anonymise_query(user_id: str, names: Sequence[str], include_group: bool) -> tuple[str, tuple[Any, ...]]:
    """Group memories that stay but name the user: theirs (unless deleted) or others' from their words."""
    own = "0" if include_group else "owner = ?"
    params: tuple[Any, ...] = () if include_group else (user_id,)
    return (
        f"SELECT rowid FROM memories WHERE shared = 1 AND ({own} OR source_username IN (SELECT value FROM json_each(?)))",
        (*params, _json(list(names))),
    )


def _usernames(db: apsw.Connection, user_id: str, extra: Sequence[str]) -> list[str]:
    """The usernames the user spoke under: given, and recorded for their sessions and messages."""
    recorded = db.execute(
        "SELECT speaker_username FROM extraction_jobs WHERE owner = ? AND speaker_username IS NOT NULL "
        "UNION SELECT username FROM observed_messages WHERE author_user_id = ? AND username IS NOT NULL",
        (user_id, user_id),
    )
    return spoken_names(extra, (name for (name,) in recorded))


def _rowids(db: apsw.Connection, query: str, params: tuple[Any, ...]) -> list[int]:
    return [int(row[0]) for row in db.execute(query, params)]


def _count(db: apsw.Connection, query: str, params: tuple[Any, ...]) -> int:
    row = db.execute(query, params).fetchone()
    return 0 if row is None else int(row[0])


def _json(values: Sequence[object]) -> str:
    return msgspec.json.encode(list(values)).decode()


#: Tries at emptying the WAL (a reader's open snapshot keeps TRUNCATE from finishing).
CHECKPOINT_TRIES = 50


def wipe_free_space(db: apsw.Connection) -> bool:
    """After an erasure: refresh the planner's statistics (STAT4 keeps sampled index keys, and
    some of them could be the erased rows'), then checkpoint with TRUNCATE so that the WAL,
    which still held the erased rows' pages, is emptied.  True when the WAL is empty."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat4'").fetchone() is not None:
        db.execute("ANALYZE")
    for _ in range(CHECKPOINT_TRIES):
        busy, _frames, _done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if not busy:
            return True
        time.sleep(0.02)
    return False
