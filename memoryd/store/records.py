"""The store's value types: what goes in (NewMemory), what comes out (MemoryRecord, SearchHit).

MemoryRecord is the wire shape of a memory; the store converts database rows (integer ms,
JSON text columns) into it in one place, ``record_from_row``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from memoryd.ids import iso_from_ms
from memoryd.store.attribution import Trust, speaker_name, trust_of
from memoryd.store.visibility import ScopeKind, key_for, scope_kind

_json_decode = msgspec.json.decode


#: How private a memory's content is (ash's set).
Sensitivity = Literal["public", "personal", "sensitive"]


class Provenance(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how a memory was learned (schema m003).  ``None`` everywhere means unknown.

    The chat it was learned in is the memory's own ``chat_id``.  These are the inputs of the
    disclosure rules, extraction's records, and supersession and people: ``source_username`` is who said it, which decides first-person vs hearsay.
    """

    chat_type: str | None = None  # ash's routing field: private, group, supergroup
    source_username: str | None = None
    source_display_name: str | None = None
    source_message_id: str | None = None
    source_session: str | None = None  # the conversation (session key) it was extracted from
    sensitivity: Sensitivity | None = None
    memory_type: str | None = None  # ash's set: preference, identity, relationship, ...
    conversation_private: bool = False  # shown only in the chat where it was learned


#: Provenance fields in column order (the memories columns have the same names).
PROVENANCE_COLUMNS: tuple[str, ...] = Provenance.__struct_fields__

NO_PROVENANCE = Provenance()

#: What a memory with no recorded type is reported as (ash's default type).
DEFAULT_MEMORY_TYPE = "knowledge"

#: The memory_type of an episode: an observed message kept as a searchable memory.
EPISODE = "episode"


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
    provenance: Provenance | None = None

    @property
    def scope_key(self) -> str:
        return key_for(shared=self.shared, owner=self.owner, chat_id=self.chat_id)


class MemoryRecord(msgspec.Struct, kw_only=True):
    """A memory as callers see it (timestamps ISO 8601 UTC).

    ``source`` is ash's: the speaker's name when one was recorded, else the label memory.add
    was given (which ``source_label`` always carries); ``trust`` and ``about`` are ash's too
    (see ``attribution.py``).
    """

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
    chat_type: str | None = None
    source_username: str | None = None
    source_display_name: str | None = None
    source_message_id: str | None = None
    source_session: str | None = None
    sensitivity: str | None = None
    memory_type: str = DEFAULT_MEMORY_TYPE  # never null on the wire: ash's CLI slices it
    conversation_private: bool = False
    source_label: str = ""
    trust: Trust = "unknown"
    #: Supersession (schema m005): the newer memory that replaced this one, when and why, and
    #: the caller's upsert ``key``.  Only superseded memories (include_superseded, get,
    #: history) have the first three set.
    superseded_by: str | None = None
    superseded_at: str | None = None
    supersede_reason: str | None = None
    key: str | None = None
    #: Who the memory is about: the caller's own people it is linked to (see
    #: ``store/people_retriever.annotate``), else its subjects.
    about: list[str] = []
    #: Kept for good: never evicted, expired or decayed (memory.pin; schema m015).
    pinned: bool = False


class SearchHit(MemoryRecord, kw_only=True):
    """A search result, best first by ``score`` (the ranking model's, for ordering only).
    ``relevance`` is the estimated probability, 0..1, that the memory helps answer the query
    (store/relevance.py: one threshold means the same for every query); ``similarity`` is the
    query's cosine with the memory (or the share of its terms, keyword-only), 0..1."""

    score: float
    similarity: float
    relevance: float


class EmbedJob(msgspec.Struct, frozen=True):
    """A claimed 'embed' job. ``generation`` is the vector space it was claimed for; a
    vector completed for an older generation is dropped (the job was re-queued for the new one)."""

    job_id: int
    memory_rowid: int
    memory_id: str
    content: str
    attempts: int
    generation: int = 0


#: Supersession columns, in record order (schema m005 and m002's superseded_by).
SUPERSESSION_COLUMNS = ("superseded_by", "superseded_at_ms", "supersede_reason", "key")

#: The memories columns of ``record_from_row``, in its order (the rowid first).
RECORD_FIELDS = (
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
    *PROVENANCE_COLUMNS,
    *SUPERSESSION_COLUMNS,
    "pinned",
)


def record_columns(table: str) -> str:
    """``RECORD_FIELDS`` qualified by ``table`` (some queries join), for a select list."""
    return ", ".join(f"{table}.{column}" for column in RECORD_FIELDS)


#: The select list every SQLite record query uses (the table by its name).
RECORD_COLUMNS = record_columns("memories")


def record_from_row(row: tuple[Any, ...]) -> MemoryRecord:
    """Build a MemoryRecord from a row selected with RECORD_COLUMNS (the rowid is skipped)."""
    (_rowid, id_, content, source, subjects, shared, owner, chat_id, created, expires, metadata, confidence) = row[:12]
    (chat_type, username, display_name, message_id, session, sensitivity, memory_type, private) = row[12:20]
    (superseded_by, superseded_at_ms, supersede_reason, key, pinned) = row[20:25]
    subject_names: list[str] = _json_decode(subjects)
    return MemoryRecord(
        id=id_,
        content=content,
        source=speaker_name(username, display_name) or source,
        subjects=subject_names,
        scope=scope_kind(bool(shared)),
        owner=owner,
        chat_id=chat_id,
        created_at=iso_from_ms(created) or "",
        expires_at=iso_from_ms(expires),
        metadata=_json_decode(metadata),
        confidence=confidence,
        chat_type=chat_type,
        source_username=username,
        source_display_name=display_name,
        source_message_id=message_id,
        source_session=session,
        sensitivity=sensitivity,
        memory_type=memory_type or DEFAULT_MEMORY_TYPE,
        conversation_private=bool(private),
        source_label=source,
        trust=trust_of(username, display_name, subject_names),
        superseded_by=superseded_by,
        superseded_at=iso_from_ms(superseded_at_ms),
        supersede_reason=supersede_reason,
        key=key,
        about=list(subject_names),
        pinned=bool(pinned),
    )


def hit_from_record(record: MemoryRecord, score: float, similarity: float, relevance: float) -> SearchHit:
    fields = {name: getattr(record, name) for name in record.__struct_fields__}
    return SearchHit(**fields, score=score, similarity=similarity, relevance=relevance)
