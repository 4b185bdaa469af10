"""Observed conversations' value types: sessions, their messages, extraction jobs, and what
storing an extracted fact did (``Learned``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from memoryd.store.records import MemoryRecord


@dataclass(frozen=True)
class Learned:
    memory_id: str
    #: True when an existing memory was refreshed instead of a new one stored.
    refreshed: bool
    #: The new memory as callers see it (None for a refresh), for the add listeners.
    record: MemoryRecord | None = None


@dataclass(frozen=True)
class SessionRef:
    owner: str
    chat_id: str | None
    session_key: str | None

    @property
    def key(self) -> str:
        return msgspec.json.encode([self.owner, self.chat_id, self.session_key]).decode()


@dataclass(frozen=True)
class SessionContext:
    """What observe knows about a session besides its messages (the latest call wins)."""

    chat_type: str | None = None
    timezone: str | None = None
    speaker_username: str | None = None
    speaker_display_name: str | None = None


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    role: str
    content: str
    message_id: str | None
    sent_at: str | float | None
    username: str | None
    display_name: str | None
    user_id: str | None


@dataclass(frozen=True)
class ExtractionJob:
    session: SessionRef
    context: SessionContext
    attempts: int
    #: The messages to extract (seq > the high-water mark), oldest first.
    messages: list[StoredMessage] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq
