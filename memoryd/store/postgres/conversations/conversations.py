"""Observed conversations on PostgreSQL (``interfaces.ConversationStore``): messages, their
extraction jobs (one per session, leased with SKIP LOCKED, the high-water mark advanced in the
transaction that stores the facts), and storing extracted facts."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import psycopg

from memoryd.store.conversation_records import (
    ExtractionJob,
    Learned,
    SessionContext,
    SessionRef,
    StoredMessage,
)
from memoryd.store.episode_records import episode_of
from memoryd.store.postgres import eviction, supersession
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres.db import Database
from memoryd.store.postgres.search import knn
from memoryd.store.postgres.visibility import predicate
from memoryd.store.records import NewMemory
from memoryd.store.supersession_records import Plan
from memoryd.store.visibility import Scope, personal_key

Conn = psycopg.Connection[Any]
MAX_SESSION_MESSAGES = 2000
PRUNE_BATCH = 5000
LEASE_MS = 15 * 60 * 1000
NEAR_DUPLICATE_COSINE = 0.95
_FIELDS = "role, content, message_id, sent_at, username, display_name, author_user_id"
_COLUMNS = f"seq, {_FIELDS}"


def _message(row: Sequence[Any]) -> StoredMessage:
    seq, role, content, message_id, sent_at, username, display_name, user_id = row
    return StoredMessage(
        int(seq), role, content, message_id, None if sent_at is None else msgspec.json.decode(sent_at),
        username, display_name, user_id,
    )  # fmt: skip


def observe(
    conn: Conn,
    session: SessionRef,
    context: SessionContext,
    messages: Sequence[StoredMessage],
    now_ms: int,
    due_at_ms: int | None,
    episodes: bool = False,
) -> int:
    key = session.key
    with conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO observed_messages (session, {_FIELDS}, received_at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    key,
                    m.role,
                    m.content,
                    m.message_id,
                    None if m.sent_at is None else msgspec.json.encode(m.sent_at).decode(),
                    m.username,
                    m.display_name,
                    m.user_id,
                    now_ms,
                )  # fmt: skip
                for m in messages
            ],
        )
    conn.execute(
        "DELETE FROM observed_messages WHERE session = %s AND seq <= ("
        "SELECT seq FROM observed_messages WHERE session = %s ORDER BY seq DESC LIMIT 1 OFFSET %s)",
        (key, key, MAX_SESSION_MESSAGES),
    )
    if due_at_ms is not None:
        conn.execute(
            "INSERT INTO extraction_jobs (session, owner, chat_id, session_key, chat_type, timezone, speaker_username, "
            "speaker_display_name, done_seq, due_at_ms, updated_at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
            "coalesce((SELECT max(seq) FROM observed_messages WHERE session = %s) - %s, 0), %s, %s) "
            "ON CONFLICT (session) DO UPDATE SET chat_type = coalesce(excluded.chat_type, extraction_jobs.chat_type), "
            "timezone = coalesce(excluded.timezone, extraction_jobs.timezone), "
            "speaker_username = coalesce(excluded.speaker_username, extraction_jobs.speaker_username), "
            "speaker_display_name = coalesce(excluded.speaker_display_name, extraction_jobs.speaker_display_name), "
            "due_at_ms = excluded.due_at_ms, updated_at_ms = excluded.updated_at_ms",
            (key, session.owner, session.chat_id, session.session_key, context.chat_type, context.timezone,
             context.speaker_username, context.speaker_display_name, key, len(messages), due_at_ms, now_ms),
        )  # fmt: skip
        job_rows.notify(conn)
    if episodes:
        # Each message also as a searchable memory of type episode, in this transaction.
        for message in messages:
            rows.insert(conn, episode_of(session, context, message), now_ms)
        job_rows.notify(conn, changed=personal_key(session.owner))
    return len(messages)


def queued_extractions(conn: Conn, session: SessionRef) -> tuple[int, bool]:
    """(how many of the session owner's sessions wait for extraction, whether ``session`` is
    one of them)."""
    row = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE session = %s) FROM extraction_jobs "
        "WHERE owner = %s AND due_at_ms IS NOT NULL AND parked_at_ms IS NULL",
        (session.key, session.owner),
    ).fetchone() or (0, 0)
    return int(row[0]), int(row[1]) > 0


def schedule_backlog(conn: Conn, now_ms: int, cutoff_ms: int) -> int:
    """Make due the sessions holding messages never extracted (observed while extraction was
    off), those received since ``cutoff_ms`` only.  Each comes due at its oldest such message's
    arrival, so the worker (which claims by due time) takes the oldest first.  How many."""
    created = conn.execute(
        "INSERT INTO extraction_jobs (session, owner, chat_id, session_key, done_seq, due_at_ms, updated_at_ms) "
        "SELECT session, (session::jsonb)->>0, (session::jsonb)->>1, (session::jsonb)->>2, "
        "coalesce((SELECT max(seq) FROM observed_messages AS old WHERE old.session = m.session "
        "AND old.received_at_ms < %(cutoff)s), 0), min(received_at_ms), %(now)s "
        "FROM observed_messages AS m WHERE received_at_ms >= %(cutoff)s "
        "AND NOT EXISTS (SELECT 1 FROM extraction_jobs AS j WHERE j.session = m.session) GROUP BY session "
        "ON CONFLICT (session) DO NOTHING",
        {"now": now_ms, "cutoff": cutoff_ms},
    ).rowcount
    resumed = conn.execute(
        "UPDATE extraction_jobs AS j SET due_at_ms = (SELECT min(received_at_ms) FROM observed_messages AS m "
        "WHERE m.session = j.session AND m.seq > j.done_seq), updated_at_ms = %(now)s "
        "WHERE due_at_ms IS NULL AND parked_at_ms IS NULL AND EXISTS (SELECT 1 FROM observed_messages AS m "
        "WHERE m.session = j.session AND m.seq > j.done_seq AND m.received_at_ms >= %(cutoff)s)",
        {"now": now_ms, "cutoff": cutoff_ms},
    ).rowcount
    if created or resumed:
        job_rows.notify(conn)
    return int(created) + int(resumed)


def prune_episodes_batch(conn: Conn, cutoff_ms: int) -> int:
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


def session_messages(conn: Conn, session: SessionRef, limit: int) -> list[StoredMessage]:
    found = conn.execute(
        f"SELECT * FROM (SELECT {_COLUMNS} FROM observed_messages WHERE session = %s ORDER BY seq DESC LIMIT %s) AS t ORDER BY seq",
        (session.key, limit),
    ).fetchall()
    return [_message(row) for row in found]


def window(
    conn: Conn, session: SessionRef, message_id: str, radius: int
) -> tuple[SessionRef, list[StoredMessage]] | None:
    bounds: tuple[str, ...]
    if session.session_key is not None:
        where, bounds = "session = %s", (session.key,)
    else:
        prefix = msgspec.json.encode([session.owner, session.chat_id]).decode()[:-1] + ","
        where, bounds = "session >= %s AND session < %s", (prefix, prefix[:-1] + "-")
    row = conn.execute(
        f"SELECT session, seq FROM observed_messages WHERE message_id = %s AND {where} ORDER BY seq DESC LIMIT 1",
        (message_id, *bounds),
    ).fetchone()
    if row is None:
        return None
    key, seq = row
    before = conn.execute(
        f"SELECT {_COLUMNS} FROM observed_messages WHERE session = %s AND seq <= %s ORDER BY seq DESC LIMIT %s",
        (key, seq, radius + 1),
    ).fetchall()
    after = conn.execute(
        f"SELECT {_COLUMNS} FROM observed_messages WHERE session = %s AND seq > %s ORDER BY seq LIMIT %s",
        (key, seq, radius),
    ).fetchall()
    owner, chat_id, session_key = msgspec.json.decode(key)
    return SessionRef(owner, chat_id, session_key), [_message(r) for r in [*reversed(before), *after]]


def claim(conn: Conn, now_ms: int, limit: int, max_messages: int, owner: str) -> list[ExtractionJob]:
    job_rows.reap(conn, "extraction_jobs", now_ms)
    found = conn.execute(
        "SELECT session, owner, chat_id, session_key, chat_type, timezone, speaker_username, speaker_display_name, "
        "done_seq, attempts FROM extraction_jobs WHERE due_at_ms IS NOT NULL AND due_at_ms <= %s "
        "AND leased_until_ms IS NULL AND parked_at_ms IS NULL ORDER BY due_at_ms LIMIT %s FOR UPDATE SKIP LOCKED",
        (now_ms, limit),
    ).fetchall()
    claimed = []
    for key, session_owner, chat_id, session_key, chat_type, timezone, username, display, done_seq, attempts in found:
        messages = [
            _message(row)
            for row in conn.execute(
                f"SELECT {_COLUMNS} FROM observed_messages WHERE session = %s AND seq > %s ORDER BY seq LIMIT %s",
                (key, done_seq, max_messages),
            )
        ]
        if not messages:
            conn.execute("UPDATE extraction_jobs SET due_at_ms = NULL WHERE session = %s", (key,))
            continue
        conn.execute(
            "UPDATE extraction_jobs SET leased_until_ms = %s, lease_owner = %s WHERE session = %s",
            (now_ms + LEASE_MS, owner, key),
        )
        claimed.append(
            ExtractionJob(
                SessionRef(session_owner, chat_id, session_key),
                SessionContext(chat_type, timezone, username, display),
                int(attempts),
                messages,
            )
        )
    return claimed


def advance(conn: Conn, job: ExtractionJob, now_ms: int, owner: str) -> bool:
    """Move the mark past the job's messages, only while this daemon holds the lease."""
    cursor = conn.execute(
        "UPDATE extraction_jobs SET done_seq = greatest(done_seq, %(seq)s), attempts = 0, last_error = NULL, "
        "leased_until_ms = NULL, lease_owner = NULL, updated_at_ms = %(now)s, "
        "due_at_ms = CASE WHEN EXISTS (SELECT 1 FROM observed_messages WHERE session = %(key)s AND seq > %(seq)s) "
        "THEN coalesce(due_at_ms, %(now)s) ELSE NULL END WHERE session = %(key)s AND lease_owner = %(owner)s",
        {"seq": job.last_seq, "now": now_ms, "key": job.session.key, "owner": owner},
    )
    return cursor.rowcount == 1


class LeaseLost(Exception):
    """Another daemon took over this extraction job (this one's lease ran out): its facts are not stored."""


def store_facts(
    conn: Conn,
    news: Sequence[NewMemory],
    fact_vectors: Sequence[npt.ArrayLike | None],
    now_ms: int,
    scope: Scope,
    normalize: Callable[[str], str],
    plans: Sequence[Plan] | None,
    completes: ExtractionJob | None,
    owner: str,
    dim: int | None,
) -> list[Learned]:
    if completes is not None and not advance(conn, completes, now_ms, owner):
        raise LeaseLost(completes.session.key)
    generation = rows.vector_generation(conn)
    # Only what the extracting caller may see is matched: a memory hidden from its chat is never
    # refreshed, named or superseded from there.
    visible_sql, visible_params = predicate(scope, now_ms=now_ms)
    normalized_scopes: dict[str, dict[str, int]] = {}
    learned: list[Learned] = []
    for index, (new, vector) in enumerate(zip(news, fact_vectors, strict=True)):
        from memoryd.store.postgres.store import lock_scope

        lock_scope(conn, new.scope_key)
        unit = None
        if vector is not None and dim is not None and generation is not None:
            unit = job_rows.normalized(vector, dim)
        row = conn.execute(
            f"SELECT m.rowid FROM memories AS m WHERE m.scope_key = %s AND m.content_hash = %s AND {visible_sql} LIMIT 1",
            (new.scope_key, rows.content_hash(new.content), *visible_params),
        ).fetchone()
        rowid = None if row is None else int(row[0])
        if rowid is None and unit is not None and generation is not None:
            # Both of the caller's scope keys are scanned; the depth leaves room for the other key's.
            for near, cosine in knn(conn, scope, unit, generation, 8, now_ms):
                if cosine < NEAR_DUPLICATE_COSINE:
                    break
                found = conn.execute(
                    f"SELECT 1 FROM memories AS m WHERE m.rowid = %s AND m.scope_key = %s AND {visible_sql}",
                    (near, new.scope_key, *visible_params),
                ).fetchone()
                if found is not None:
                    rowid = near
                    break
        if rowid is None and unit is None:
            texts = normalized_scopes.get(new.scope_key)
            if texts is None:
                key_sql, key_params = predicate(scope, now_ms=now_ms, key=new.scope_key)
                texts = normalized_scopes[new.scope_key] = {
                    normalize(content): int(r)
                    for r, content in conn.execute(
                        f"SELECT m.rowid, m.content FROM memories AS m WHERE {key_sql}", key_params
                    )
                }
            rowid = texts.get(normalize(new.content))
        if rowid is not None:
            (memory_id, key) = conn.execute(
                "UPDATE memories SET updated_at_ms = %s, confidence = greatest(confidence, %s) WHERE rowid = %s RETURNING id, scope_key",
                (now_ms, float(new.confidence), rowid),
            ).fetchone() or ("", "")
            provenance = new.provenance
            detail = {"source": new.source, "message_id": provenance.source_message_id if provenance else None}
            rows.audit(conn, key, memory_id, "refreshed", new.owner, now_ms, detail)
            learned.append(Learned(memory_id, refreshed=True))
            continue
        if plans is None:
            rowid, _ = rows.insert(conn, new, now_ms)
            eviction.hold_cap(conn, new.scope_key, now_ms)
            record = rows.fetch(conn, rowid)
        else:
            stored = supersession.add(conn, scope, new, plans[index], now_ms)
            rowid, record = stored.rowid, stored.record
        if unit is not None and generation is not None:
            conn.execute(
                "INSERT INTO memory_vectors (scope_key, rowid, generation, embedding) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (scope_key, rowid) DO UPDATE SET generation = excluded.generation, embedding = excluded.embedding",
                (new.scope_key, rowid, generation, np.asarray(unit, dtype=np.float32)),
            )
            conn.execute("DELETE FROM jobs WHERE memory_rowid = %s AND kind = %s", (rowid, rows.EMBED))
        normalized_scopes.get(new.scope_key, {})[normalize(new.content)] = rowid
        learned.append(Learned(record.id, refreshed=False, record=record))
    job_rows.notify(conn)
    return learned


def fail(conn: Conn, job: ExtractionJob, error: str, now_ms: int, park: bool, retry_after_ms: int, owner: str) -> int:
    attempts = job.attempts + 1
    due = now_ms + max(job_rows.backoff_ms(attempts), retry_after_ms)
    conn.execute(
        "UPDATE extraction_jobs SET attempts = %s, last_error = %s, leased_until_ms = NULL, lease_owner = NULL, "
        "updated_at_ms = %s, due_at_ms = %s, parked_at_ms = %s WHERE session = %s AND lease_owner = %s",
        (attempts, error[: job_rows.MAX_ERROR_CHARS], now_ms, due, now_ms if park else None, job.session.key, owner),
    )
    return attempts


def next_due_ms(conn: Conn) -> int | None:
    row = conn.execute(
        "SELECT min(greatest(due_at_ms, coalesce(leased_until_ms, 0))) FROM extraction_jobs "
        "WHERE due_at_ms IS NOT NULL AND parked_at_ms IS NULL"
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def status(conn: Conn) -> dict[str, Any]:
    pending, parked, failing = conn.execute(
        "SELECT count(*) FILTER (WHERE parked_at_ms IS NULL), count(*) FILTER (WHERE parked_at_ms IS NOT NULL), "
        "count(*) FILTER (WHERE attempts > 0 AND parked_at_ms IS NULL) FROM extraction_jobs WHERE due_at_ms IS NOT NULL"
    ).fetchone() or (0, 0, 0)
    row = conn.execute(
        "SELECT last_error FROM extraction_jobs WHERE last_error IS NOT NULL ORDER BY updated_at_ms DESC LIMIT 1"
    ).fetchone()
    (held,) = conn.execute("SELECT count(*) FROM observed_messages").fetchone() or (0,)
    return {
        "pending_sessions": int(pending),
        "failing_sessions": int(failing),
        "parked_sessions": int(parked),
        "last_error": None if row is None else row[0],
        "messages_held": int(held),
    }


def retry_parked(conn: Conn, now_ms: int) -> dict[str, int]:
    extract = conn.execute(
        "UPDATE extraction_jobs SET parked_at_ms = NULL, attempts = 0, due_at_ms = %s, leased_until_ms = NULL, "
        "lease_owner = NULL, updated_at_ms = %s WHERE parked_at_ms IS NOT NULL",
        (now_ms, now_ms),
    ).rowcount
    embed = conn.execute(
        "UPDATE jobs SET attempts = 0, due_at_ms = %s, parked_at_ms = NULL WHERE attempts > 0 AND leased_until_ms IS NULL",
        (now_ms,),
    ).rowcount
    job_rows.notify(conn)
    return {"extract": int(extract), "embed": int(embed)}


def prune(conn: Conn, cutoff_ms: int) -> int:
    removed = conn.execute(
        "DELETE FROM observed_messages WHERE (session, seq) IN (SELECT session, seq FROM observed_messages "
        "WHERE received_at_ms < %s ORDER BY received_at_ms LIMIT %s)",
        (cutoff_ms, PRUNE_BATCH),
    ).rowcount
    conn.execute(
        "DELETE FROM extraction_jobs WHERE leased_until_ms IS NULL AND NOT EXISTS "
        "(SELECT 1 FROM observed_messages AS m WHERE m.session = extraction_jobs.session)"
    )
    return int(removed)


class Conversations:
    """``interfaces.ConversationStore`` on PostgreSQL."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._db: Database = store.db
        self._clock = store.clock

    async def observe(
        self,
        session: SessionRef,
        context: SessionContext,
        messages: Sequence[StoredMessage],
        *,
        extract_after_ms: int | None,
        episodes: bool = False,
    ) -> int:
        now = self._clock()
        due = None if extract_after_ms is None else now + extract_after_ms
        return await self._db.run(observe, session, context, list(messages), now, due, episodes)

    async def queued_extractions(self, session: SessionRef) -> tuple[int, bool]:
        return await self._db.run(queued_extractions, session)

    async def session_messages(self, session: SessionRef, limit: int) -> builtins.list[StoredMessage]:
        return await self._db.run(session_messages, session, limit)

    async def window(
        self, session: SessionRef, message_id: str, radius: int
    ) -> tuple[SessionRef, builtins.list[StoredMessage]] | None:
        return await self._db.run(window, session, message_id, radius)

    async def claim(self, limit: int, max_messages: int) -> builtins.list[ExtractionJob]:
        return await self._db.run(claim, self._clock(), limit, max_messages, self._store.owner)

    async def store_facts(
        self,
        news: Sequence[NewMemory],
        fact_vectors: Sequence[npt.ArrayLike | None],
        *,
        scope: Scope,
        normalize: Callable[[str], str],
        completes: ExtractionJob | None = None,
        plans: Sequence[Plan] | None = None,
    ) -> builtins.list[Learned]:
        space = self._store.space
        return await self._db.run(
            store_facts, list(news), list(fact_vectors), self._clock(), scope, normalize, None if plans is None else list(plans),
            completes, self._store.owner, None if space is None else space.dim,
        )  # fmt: skip

    async def fail(self, job: ExtractionJob, error: str, *, park: bool, retry_after_ms: int = 0) -> int:
        return await self._db.run(fail, job, error, self._clock(), park, retry_after_ms, self._store.owner)

    def clear_leases(self) -> None:
        """Start-up: release what earlier runs of this daemon (same node name) held."""
        pattern = self._store.node.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"

        def clear(conn: Conn) -> None:
            for table in ("extraction_jobs", "jobs"):
                conn.execute(
                    f"UPDATE {table} SET leased_until_ms = NULL, lease_owner = NULL WHERE lease_owner LIKE %s",
                    (pattern,),
                )

        self._db.run_sync(clear)

    async def next_due_ms(self) -> int | None:
        return await self._db.run(next_due_ms)

    async def status(self) -> dict[str, Any]:
        return await self._db.run(status)

    def retry_parked(self) -> dict[str, int]:
        return self._db.run_sync(retry_parked, self._clock())

    def schedule_backlog(self, *, retention_ms: int) -> int:
        now = self._clock()
        return self._db.run_sync(schedule_backlog, now, now - retention_ms)

    def prune_episodes(self, *, retention_ms: int) -> int:
        cutoff, total = self._clock() - retention_ms, 0
        while (removed := self._db.run_sync(prune_episodes_batch, cutoff)) > 0:
            total += removed
            if removed < PRUNE_BATCH:
                break
        return total

    def prune(self, *, retention_ms: int) -> int:
        cutoff, total = self._clock() - retention_ms, 0
        while (removed := self._db.run_sync(prune, cutoff)) > 0:
            total += removed
            if removed < PRUNE_BATCH:
                break
        return total
