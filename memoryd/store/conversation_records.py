"""Observed conversations' value types: sessions, their messages (and their rows), extraction
jobs, and what storing an extracted fact did (``Learned``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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

    @classmethod
    def of_key(cls, key: str) -> SessionRef:
        owner, chat_id, session_key = msgspec.json.decode(key)
        return cls(owner, chat_id, session_key)


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
class MessagesRead:
    """The stored messages a caller read to extract facts from (``memory.extract``): the facts
    are stored only while every one of them still exists, so an erasure during the LLM's
    answer leaves nothing learned from the erased messages."""

    session: SessionRef
    seqs: tuple[int, ...]

    @classmethod
    def of(cls, session: SessionRef, messages: Sequence[StoredMessage]) -> MessagesRead:
        return cls(session, tuple(sorted({message.seq for message in messages})))


@dataclass(frozen=True)
class ErasuresSeen:
    """The newest erasure in the store (``store/erasure_log.py``: its mark, None before the
    first) when a caller took the messages it extracts facts from in its request
    (``memory.extract_from_messages``): the facts are stored only while ``user_id`` has not
    been erased since, checked in the same transaction, so an erasure that answered success
    during the LLM's answer leaves nothing learned before it."""

    user_id: str
    mark: int | None


#: What extracted facts were learned from, checked when they are stored (``store_facts``).
LearnedFrom = MessagesRead | ErasuresSeen


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


#: The columns of ``observed_messages`` a message is stored in, in ``message_values``' order.
MESSAGE_FIELDS = "role, content, message_id, sent_at, username, display_name, author_user_id"
#: The columns ``message_from_row`` reads, in its order.
MESSAGE_COLUMNS = f"seq, {MESSAGE_FIELDS}"
#: The columns of ``extraction_jobs`` ``job_from_row`` reads, in its order.
JOB_COLUMNS = (
    "session, owner, chat_id, session_key, chat_type, timezone, speaker_username, speaker_display_name, "
    "done_seq, attempts"
)


def message_from_row(row: Sequence[Any]) -> StoredMessage:
    seq, role, content, message_id, sent_at, username, display_name, user_id = row
    return StoredMessage(
        int(seq), role, content, message_id, None if sent_at is None else msgspec.json.decode(sent_at),
        username, display_name, user_id,
    )  # fmt: skip


def message_values(session_key: str, message: StoredMessage, now_ms: int) -> tuple[Any, ...]:
    """A message as stored: the session's key, ``MESSAGE_FIELDS``, the time it was received."""
    m = message
    sent_at = None if m.sent_at is None else msgspec.json.encode(m.sent_at).decode()
    return (session_key, m.role, m.content, m.message_id, sent_at, m.username, m.display_name, m.user_id, now_ms)


def job_from_row(row: Sequence[Any], messages: list[StoredMessage]) -> ExtractionJob:
    """A claimed job from a row of ``JOB_COLUMNS`` and the messages past its high-water mark."""
    _key, owner, chat_id, session_key, chat_type, timezone, username, display, _done_seq, attempts = row
    return ExtractionJob(
        SessionRef(owner, chat_id, session_key),
        SessionContext(chat_type, timezone, username, display),
        int(attempts),
        messages,
    )
