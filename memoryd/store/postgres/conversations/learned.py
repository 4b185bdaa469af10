"""Storing extracted facts on PostgreSQL: new memories, or a refresh of the live memory that
already says it (the same content, a vector within ``NEAR_DUPLICATE_COSINE``, or the same
normalized text), in the transaction that advances the job's high-water mark."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from memoryd.errors import ExtractedMessagesGone, ExtractionJobGone
from memoryd.store.conversation_records import (
    ErasuresSeen,
    ExtractionJob,
    Learned,
    LearnedFrom,
    MessagesRead,
)
from memoryd.store.conversation_rules import NEAR_DUPLICATE_COSINE, refresh_detail
from memoryd.store.erasure_log import erased_after
from memoryd.store.postgres import eviction, scope_lock, supersession
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres.conversations.conversations import messages_remain
from memoryd.store.postgres.conversations.extraction_jobs import advance
from memoryd.store.postgres.erasure import erasure_mark
from memoryd.store.postgres.search import knn
from memoryd.store.postgres.visibility import predicate
from memoryd.store.records import NewMemory
from memoryd.store.supersession_records import Plan
from memoryd.store.visibility import Scope, personal_key

Conn = psycopg.Connection[Any]


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
    read: LearnedFrom | None = None,
) -> list[Learned]:
    # First of all, the lock an erasure of the caller takes first: an erasure committed before
    # the checks below (its log entry is read), or waits for these facts and erases them too;
    # and neither holds a row the other waits for (no deadlock).
    scope_lock.lock_scope(conn, personal_key(scope.user_id))
    if completes is not None and not advance(conn, completes, now_ms, owner):
        # Erased since the claim, or another daemon took it over when this one's lease ran out.
        raise ExtractionJobGone()
    if isinstance(read, MessagesRead) and not messages_remain(conn, read):
        raise ExtractedMessagesGone()  # erased (or pruned) while the LLM answered
    if isinstance(read, ErasuresSeen) and erased_after(erasure_mark(conn), read.mark, read.user_id):
        raise ExtractedMessagesGone()
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
            rows.audit(conn, key, memory_id, "refreshed", new.owner, now_ms, refresh_detail(new))
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
