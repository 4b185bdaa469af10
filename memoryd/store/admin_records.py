"""The whole-store operations' value types: the export format's lines, and the reports of gc,
eviction, import, check and backup."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from memoryd.ids import iso_from_ms
from memoryd.store.records import Provenance
from memoryd.store.visibility import ScopeKind

#: The states a memory is counted in (`memoryd stats`), in the order it shows them.
MEMORY_STATES = ("active", "expired", "superseded", "deleted")


@dataclass
class BackupReport:
    path: Path
    pages: int
    bytes: int
    seconds: float


class PersonLine(msgspec.Struct, tag="person", tag_field="record", forbid_unknown_fields=True):
    id: str
    owner: str
    name: str
    aliases: list[str]
    relationship: str | None
    created_at: str
    updated_at: str
    #: Ids of the memories linked to this person (any scope; the links are pointers).
    memories: list[str]


@dataclass
class PeopleReport:
    imported: int = 0
    already_present: int = 0
    #: Lines folded into a person of the same owner and name that the store already had.
    merged: int = 0
    #: Ids of the person lines not imported because their owner already had ``max_people``
    #: people (limits.max_people_per_owner); their memories are imported without the link.
    refused: list[str] = field(default_factory=list)


FORMAT = "memoryd-export"


#: Version 4 added ``pinned`` (schema m015); older files import with nothing pinned.
VERSION = 4


#: Versions ``memoryd import`` reads.
READABLE_VERSIONS = (1, 2, 3, 4)


class ExportHeader(msgspec.Struct, forbid_unknown_fields=True):
    format: str
    version: int
    exported_at: str
    user: str | None = None


class MemoryLine(Provenance, frozen=True, forbid_unknown_fields=True):
    """One memory, every column but the derived ones (rowid, scope key, content hash, vector).

    The provenance fields (version 2) are records.Provenance's own, after these (msgspec puts
    a base's keyword-only fields last), in PROVENANCE_COLUMNS order: a new provenance column
    is exported and imported without a change here."""

    id: str
    scope: ScopeKind
    owner: str
    chat_id: str | None
    source: str
    content: str
    subjects: list[str]
    metadata: dict[str, Any]
    confidence: float
    created_at: str
    updated_at: str
    expires_at: str | None
    deleted_at: str | None
    expiry_recorded_at: str | None
    superseded_by: str | None
    access_count: int
    last_access_at: str | None
    # Schema m005 (files written before it have none of these).
    superseded_at: str | None = None
    supersede_reason: str | None = None
    key: str | None = None
    # Schema m015 (version 4): kept for good, never evicted or expired.
    pinned: bool = False


@dataclass
class ImportReport:
    imported: int = 0
    already_present: int = 0
    embed_jobs: int = 0
    people: PeopleReport = field(default_factory=PeopleReport)


@dataclass
class EvictionReport:
    evicted: int = 0
    #: scope_key -> (count before, limit)
    scopes: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: The scope keys at least one memory was evicted from (their cached summaries may quote it).
    evicted_from: set[str] = field(default_factory=set)


#: The kinds of record an erasure (memory.forget_all, `memoryd forget-user`) counts, in report order.
ERASURE_KINDS = (
    "memories",
    "episodes",
    "group_memories_deleted",
    "group_memories_anonymised",
    "people",
    "messages",
    "sessions",
    "jobs",
    "vectors",
    "audit_events",
)

#: Why gc removes a memory, in the order reports list them.
PURGE_REASONS = ("deleted", "expired", "superseded")


@dataclass
class GcReport:
    """What gc removed (or, in a dry run, would remove)."""

    dry_run: bool
    cutoff_ms: int
    #: Memories removed, by reason (one of PURGE_REASONS).
    purged_by_reason: Counter[str] = field(default_factory=Counter)
    events_pruned: int = 0
    optimize_steps: int = 0
    seconds: float = 0.0

    @property
    def purged(self) -> int:
        return self.purged_by_reason.total()

    def to_dict(self) -> dict[str, object]:
        return {
            "dry_run": self.dry_run,
            "cutoff_ms": self.cutoff_ms,
            **{f"purged_{reason}": self.purged_by_reason[reason] for reason in PURGE_REASONS},
            "events_pruned": self.events_pruned,
            "optimize_steps": self.optimize_steps,
            "seconds": self.seconds,
            "cutoff": iso_from_ms(self.cutoff_ms),
            "purged": self.purged,
        }


@dataclass
class Finding:
    check: str
    ok: bool
    detail: str
    count: int = 0
    repairable: bool = False

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
