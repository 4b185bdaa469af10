"""The store's value types: what goes in (NewMemory), what comes out (MemoryRecord, SearchHit).

MemoryRecord is the wire shape of a memory; the store converts database rows (integer ms,
JSON text columns) into it in one place, ``record_from_row``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from memoryd.ids import iso_from_ms
from memoryd.store.visibility import ScopeKind, key_for, scope_kind

_json_decode = msgspec.json.decode


class NewMemory(msgspec.Struct):
    """A memory to add. ``shared`` makes it a group memory of ``chat_id``."""

    content: str
    owner: str
    chat_id: str | None
    shared: bool
    source: str
    subjects: list[str] = []
    expires_at_ms: int | None = None
    metadata: dict[str, Any] = {}
    confidence: float = 1.0

    @property
    def scope_key(self) -> str:
        return key_for(shared=self.shared, owner=self.owner, chat_id=self.chat_id)


class MemoryRecord(msgspec.Struct):
    """A memory as callers see it (timestamps ISO 8601 UTC)."""

    id: str
    content: str
    source: str
    subjects: list[str]
    scope: ScopeKind
    owner: str
    chat_id: str | None
    created_at: str
    expires_at: str | None
    metadata: dict[str, Any]
    confidence: float


class SearchHit(MemoryRecord):
    """A search result: ``score`` is the RRF score (higher is better); ``similarity`` is in 0..1."""

    score: float
    similarity: float


class EmbedJob(msgspec.Struct, frozen=True):
    """A claimed 'embed' job. ``generation`` is the vector space it was claimed for; a
    vector completed for an older generation is dropped (the job was re-queued for the new one)."""

    job_id: int
    memory_rowid: int
    memory_id: str
    content: str
    attempts: int
    generation: int = 0


#: The memories columns every record query selects (qualified: some queries join), in
#: ``record_from_row`` order.
RECORD_COLUMNS = ", ".join(
    f"memories.{column}"
    for column in (
        "rowid",
        "id",
        "content",
        "source",
        "subjects",
        "shared",
        "owner",
        "chat_id",
        "created_at_ms",
        "expires_at_ms",
        "metadata",
        "confidence",
    )
)


def record_from_row(row: tuple[Any, ...]) -> MemoryRecord:
    """Build a MemoryRecord from a row selected with RECORD_COLUMNS (the rowid is skipped)."""
    (_rowid, id_, content, source, subjects, shared, owner, chat_id, created, expires, metadata, confidence) = row
    return MemoryRecord(
        id=id_,
        content=content,
        source=source,
        subjects=_json_decode(subjects),
        scope=scope_kind(bool(shared)),
        owner=owner,
        chat_id=chat_id,
        created_at=iso_from_ms(created) or "",
        expires_at=iso_from_ms(expires),
        metadata=_json_decode(metadata),
        confidence=confidence,
    )


def hit_from_record(record: MemoryRecord, score: float, similarity: float) -> SearchHit:
    fields = {name: getattr(record, name) for name in record.__struct_fields__}
    return SearchHit(**fields, score=score, similarity=similarity)
