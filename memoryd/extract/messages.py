"""A conversation as the extractor reads it: messages of users and the assistant, and who is speaking."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec


class ConversationMessage(msgspec.Struct, kw_only=True, frozen=True):
    """One message of a conversation (the shape of ``memory.observe``'s ``messages``)."""

    role: Literal["user", "assistant"]
    content: str
    id: str | None = None
    timestamp: datetime | None = None
    #: Who wrote a user message, in a group chat where several people talk.
    username: str | None = None
    display_name: str | None = None
    user_id: str | None = None


class Speaker(msgspec.Struct, kw_only=True, frozen=True):
    """The person whose memory this is and who speaks in the user messages (unless a message
    names someone else)."""

    username: str | None = None
    display_name: str | None = None

    def label(self) -> str:
        """"@david (David Cramer)", "@david", "David Cramer", or "the user"."""
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
