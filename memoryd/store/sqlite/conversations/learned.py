"""Storing extracted facts: new memories, or a refresh of the live memory that already says it.

A fact is the same as a live memory of its scope that the extracting caller may see (the
disclosure rules of ``visibility.predicate``: a memory hidden from the caller's chat is never
refreshed, named or superseded from there) when the content is identical, when its vector is within :data:`NEAR_DUPLICATE_COSINE` of one of the
scope's vectors, or, without vectors, when both read the same once normalized (the caller's
``normalize``: case, spacing, final punctuation).  A refresh bumps ``updated_at_ms`` and the
confidence and is audited; the memory keeps its id, text and expiry.  A new memory keeps the
vector its fact was compared with, so the backfill does not embed it a second time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import apsw
import numpy.typing as npt

from memoryd.store.conversation_records import Learned
from memoryd.store.conversation_rules import NEAR_DUPLICATE_COSINE, refresh_detail
from memoryd.store.records import NewMemory
from memoryd.store.sqlite.admin import eviction
from memoryd.store.sqlite.db.database import one
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.memories import memories
from memoryd.store.sqlite.supersession import supersession
from memoryd.store.sqlite.supersession.supersession import Plan
from memoryd.store.sqlite.vectors import vector_search, vectors
from memoryd.store.sqlite.visibility_sql import predicate
from memoryd.store.visibility import Scope


def store_facts(
    db: apsw.Connection,
    news: Sequence[NewMemory],
    fact_vectors: Sequence[npt.ArrayLike | None],
    now_ms: int,
    *,
    scope: Scope,
    normalize: Callable[[str], str],
    plans: Sequence[Plan] | None = None,
) -> list[Learned]:
    """Add or refresh each of ``news`` (``fact_vectors`` aligned with it, None where unknown),
    for the caller ``scope`` (its chat type included): only what it may see is matched.

    ``plans`` (aligned too): a new memory is stored through supersession's add, so it replaces
    the older memories it contradicts as a ``memory.add`` would."""
    space = vectors.read_space(db)
    normalized_scopes: dict[str, dict[str, int]] = {}
    learned = []
    for index, (new, vector) in enumerate(zip(news, fact_vectors, strict=True)):
        unit = None if vector is None or space is None else vectors.normalized(vector, space.dim)
        rowid = _exact_or_near(db, scope, new, unit, space, now_ms)
        if rowid is None and unit is None:
            texts = normalized_scopes.get(new.scope_key)
            if texts is None:
                texts = _normalized_texts(db, scope, new.scope_key, now_ms, normalize)
                normalized_scopes[new.scope_key] = texts
            rowid = texts.get(normalize(new.content))
        if rowid is not None:
            learned.append(Learned(_refresh(db, rowid, new, now_ms), refreshed=True))
            continue
        if plans is None:
            rowid = memories.insert(db, new, now_ms)
            eviction.hold_cap(db, new.scope_key, now_ms)
            record = supersession.record_of(db, rowid)
        else:
            stored = supersession.add(db, scope, new, plans[index], now_ms)
            rowid, record = stored.rowid, stored.record
        if unit is not None and space is not None:
            _keep_vector(db, space, rowid, new, unit)
        normalized_scopes.get(new.scope_key, {})[normalize(new.content)] = rowid
        learned.append(Learned(record.id, refreshed=False, record=record))
    return learned


def _exact_or_near(
    db: apsw.Connection,
    scope: Scope,
    new: NewMemory,
    unit: vectors.FloatArray | None,
    space: vectors.VectorSpace | None,
    now_ms: int,
) -> int | None:
    visible_sql, visible_params = predicate(scope, now_ms=now_ms)
    row = db.execute(
        f"SELECT rowid FROM memories WHERE memories.scope_key = ? AND memories.content_hash = ? AND {visible_sql} "
        "LIMIT 1",
        (new.scope_key, memories.content_hash(new.content), *visible_params),
    ).fetchone()
    if row is not None:
        return int(row[0])
    if unit is None or space is None:
        return None
    # The scan filters by the caller's disclosure rules inside the KNN (``vector_filters``);
    # the row is checked again with the full predicate.
    # Both of the caller's scope keys are scanned; the depth leaves room for the other key's.
    for rowid, cosine in vector_search.knn(db, space, scope, unit, depth=8, coarse_k=64, now_ms=now_ms):
        if cosine < NEAR_DUPLICATE_COSINE:
            break
        found = db.execute(
            f"SELECT 1 FROM memories WHERE memories.rowid = ? AND memories.scope_key = ? AND {visible_sql}",
            (rowid, new.scope_key, *visible_params),
        ).fetchone()
        if found is not None:
            return rowid
    return None


def _keep_vector(
    db: apsw.Connection, space: vectors.VectorSpace, rowid: int, new: NewMemory, unit: vectors.FloatArray
) -> None:
    """The fact was embedded for the duplicate check: store that vector now instead of
    embedding the same text again in the backfill (what ``jobs.complete_embed`` would do)."""
    disclosure, chat_id = one(db, "SELECT disclosure, chat_id FROM memories WHERE rowid = ?", (rowid,))
    row = vectors.VectorRow(rowid, new.scope_key, new.expires_at_ms, disclosure, chat_id)
    vectors.write_vectors(db, space, [(row, unit)])
    db.execute("UPDATE memories SET vector_gen = ? WHERE rowid = ?", (space.generation, rowid))
    jobs.drop_jobs_of(db, [rowid])


def _normalized_texts(
    db: apsw.Connection, scope: Scope, scope_key: str, now_ms: int, normalize: Callable[[str], str]
) -> dict[str, int]:
    # One walk of the scope per batch (through the scope index), only when there are no vectors.
    visible_sql, visible_params = predicate(scope, now_ms=now_ms, key=scope_key)
    rows = db.execute(f"SELECT rowid, content FROM memories WHERE {visible_sql}", visible_params)
    return {normalize(content): rowid for rowid, content in rows}


def _refresh(db: apsw.Connection, rowid: int, new: NewMemory, now_ms: int) -> str:
    db.execute(
        "UPDATE memories SET updated_at_ms = ?, confidence = max(confidence, ?) WHERE rowid = ?",
        (now_ms, float(new.confidence), rowid),
    )
    (memory_id,) = db.execute("SELECT id FROM memories WHERE rowid = ?", (rowid,)).fetchone()
    memories.audit(db, memory_id, "refreshed", new.owner, now_ms, refresh_detail(new))
    return str(memory_id)
