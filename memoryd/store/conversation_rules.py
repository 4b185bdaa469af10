"""The rules of observed conversations every engine applies: which session keys are one owner's
(or one chat's), a message window's shape, the extraction status, retention in batches, and
when an extracted fact is one a scope already has."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from memoryd.store.conversation_records import SessionRef, StoredMessage, message_from_row
from memoryd.store.records import NewMemory

#: Messages kept per session; older ones are dropped as new ones arrive.
MAX_SESSION_MESSAGES = 2000
#: A claimed extraction stays invisible to other claims this long (an LLM call with its
#: retries fits well inside; a crash is healed by start-up clearing leases anyway).
EXTRACTION_LEASE_MS = 15 * 60 * 1000
#: Cosine at or above which a fact counts as a memory the scope already has (all-MiniLM-L6-v2:
#: paraphrases such as "Likes tea" / "likes tea." score above 0.95; different facts about the
#: same subject, "likes green tea" / "likes black tea", below).
NEAR_DUPLICATE_COSINE = 0.95


def key_range(*parts: str | None) -> tuple[str, str]:
    """The session keys that start with ``parts`` (an owner; an owner and a chat), as a range
    [low, high).  Keys are JSON [owner, chat, key]: the sessions of one owner and chat are exactly
    the keys from '["owner","chat",' (inclusive) to '["owner","chat"-' (',' + 1 = '-')."""
    prefix = msgspec.json.encode(list(parts)).decode()[:-1] + ","
    return prefix, prefix[:-1] + "-"


def window_of(
    key: str, before: Sequence[Sequence[Any]], after: Sequence[Sequence[Any]]
) -> tuple[SessionRef, list[StoredMessage]]:
    """A message window: its session, and the rows before the message (newest first, the message
    itself included) and after it (oldest first) as messages in order."""
    return SessionRef.of_key(key), [message_from_row(r) for r in [*reversed(before), *after]]


def extraction_status(pending: int, failing: int, parked: int, last_error: str | None, held: int) -> dict[str, Any]:
    """``memoryd status``'s extraction part."""
    return {
        "pending_sessions": int(pending),
        "failing_sessions": int(failing),
        "parked_sessions": int(parked),
        "last_error": last_error,
        "messages_held": int(held),
    }


def in_batches(step: Callable[[], int], batch: int) -> int:
    """Run ``step`` (one short transaction removing up to ``batch`` rows; how many) until it
    removes fewer; how many in all."""
    total = 0
    while (removed := step()) > 0:
        total += removed
        if removed < batch:
            break
    return total


def refresh_detail(new: NewMemory) -> dict[str, Any]:
    """The audit detail of a memory refreshed by a fact that says it again."""
    provenance = new.provenance
    return {"source": new.source, "message_id": provenance.source_message_id if provenance else None}
