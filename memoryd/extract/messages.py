"""A conversation as the extractor reads it: messages of users and the assistant, and who is speaking."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

import msgspec


class ConversationMessage(msgspec.Struct, kw_only=True, frozen=True):
    """One message of a conversation (the shape of ``memory.observe``'s ``messages``)."""

    role: Literal["user", "assistant"]
    content: str
    id: str | None = None
    #: ISO 8601, or seconds since the epoch.
    timestamp: datetime | float | None = None
    #: Who wrote a user message, in a group chat where several people talk.
    username: str | None = None
    display_name: str | None = None
    user_id: str | None = None

    def sent_at(self) -> datetime | None:
        if isinstance(self.timestamp, float):
            try:
                return datetime.fromtimestamp(self.timestamp, UTC)
            except (OverflowError, OSError, ValueError):
                return None
        return self.timestamp


class Speaker(msgspec.Struct, kw_only=True, frozen=True):
    """The person whose memory this is and who speaks in the user messages (unless a message
    names someone else)."""

    username: str | None = None
    display_name: str | None = None

    def label(self) -> str:
        """ "@david (David Cramer)", "@david", "David Cramer", or "the user"."""
        username = (self.username or "").strip().lstrip("@")
        display = (self.display_name or "").strip()
        if username and display:
            return f"@{username} ({display})"
        if username:
            return f"@{username}"
        return display or "the user"

    def name(self) -> str | None:
        """How a fact should call this person: the display name, else the username."""
        return (self.display_name or "").strip() or (self.username or "").strip().lstrip("@") or None


def author(message: ConversationMessage, speaker: Speaker) -> Speaker:
    """Who wrote ``message``: the names it carries, else the extraction's speaker."""
    if message.username or message.display_name:
        return Speaker(username=message.username, display_name=message.display_name)
    return speaker


def owner_as_author(messages: Sequence[ConversationMessage], user_id: str) -> Speaker | None:
    """The names the owner wrote under, from a message that carries the owner's ``user_id``
    (the newest that names its author), or None: a host that posts a message's ``user_id``
    says who the owner is in the conversation even when the call names no speaker."""
    for message in reversed(messages):
        if message.role == "user" and message.user_id == user_id and (message.username or message.display_name):
            return Speaker(username=message.username, display_name=message.display_name)
    return None


def around(messages: Sequence[ConversationMessage], message_id: str, radius: int) -> list[ConversationMessage] | None:
    """The message ``message_id`` with ``radius`` messages either side (``memory.extract``'s
    window, ``extraction.context_messages``), or None when no message has that id."""
    for index, message in enumerate(messages):
        if message.id == message_id:
            return list(messages[max(0, index - radius) : index + radius + 1])
    return None
