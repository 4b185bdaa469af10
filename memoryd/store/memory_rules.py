"""What every engine decides alike about a memory's row, apart from the SQL that stores it: the
dedupe identity, the disclosure code and provenance values of a new memory, where a list page
continues, a pin's audit event, and which successors a caller may be told of.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from typing import Any, NamedTuple

from memoryd.errors import AmbiguousIdPrefix, UnknownListCursor
from memoryd.store.records import NO_PROVENANCE, PROVENANCE_COLUMNS, MemoryRecord, NewMemory, Provenance
from memoryd.store.visibility import Disclosure, Scope


def content_hash(content: str) -> bytes:
    """Identity for dedupe: Unicode-normalised, whitespace-collapsed content."""
    canonical = " ".join(unicodedata.normalize("NFC", content).split())
    # 128 bits are plenty to tell texts apart; as bytes (schema m010) they take 16 bytes in the
    # row and in the dedupe index, not 32 hex characters.
    return hashlib.sha256(canonical.encode("utf-8")).digest()[:16]


def disclosure_code(new: NewMemory) -> int:
    """The ``Disclosure`` code a new memory is stored (and deduplicated) under."""
    provenance = new.provenance or NO_PROVENANCE
    return Disclosure.of(provenance.chat_type, provenance.sensitivity, provenance.conversation_private).code


def provenance_values(provenance: Provenance) -> list[object]:
    """The provenance fields in ``PROVENANCE_COLUMNS`` order, as the insert binds them."""
    return [getattr(provenance, name) for name in PROVENANCE_COLUMNS]


class ListPosition(NamedTuple):
    """Where a list page ends: lists run newest first by (created_at_ms, rowid)."""

    created_at_ms: int
    rowid: int


def list_position(prefix: str, rows: Sequence[Sequence[Any]]) -> ListPosition:
    """The position a list cursor names, from the (created_at_ms, rowid) rows its prefix matched
    (at most two are read): AmbiguousIdPrefix for several, UnknownListCursor for none."""
    if len(rows) > 1:
        raise AmbiguousIdPrefix(prefix, len(rows))
    if not rows:
        raise UnknownListCursor(prefix)
    return ListPosition(int(rows[0][0]), int(rows[0][1]))


def pin_event(scope: Scope, pinned: bool, expires_at_ms: int | None) -> tuple[str, dict[str, Any]]:
    """The audit event of a pin or unpin and its detail; a pin keeps the expiry it cleared."""
    detail: dict[str, Any] = {"chat_id": scope.chat_id}
    if pinned and expires_at_ms is not None:
        detail["expires_at_ms"] = int(expires_at_ms)
    return ("pinned" if pinned else "unpinned"), detail


def replaced_records(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    """The records that name a successor (``hide_unseen_successors`` checks those)."""
    return [record for record in records if record.superseded_by is not None]


def hide_successors(replaced: Iterable[MemoryRecord], seen: Collection[str]) -> None:
    """Clear ``superseded_by`` and ``supersede_reason`` of each record whose successor is not
    among ``seen`` (the successor ids the caller may see): the id would name it and the reason
    quotes its content ("'berlin' -> 'zurich'").  ``superseded_at`` stays: the record was
    replaced, by nothing the caller can look at."""
    for record in replaced:
        if record.superseded_by not in seen:
            record.superseded_by = None
            record.supersede_reason = None
