"""Episodes: each observed message, kept as a searchable memory of type ``episode``.

An episode is an ordinary memory (so search, visibility and the disclosure rules treat it as
every memory): the caller's personal memory, learned in the chat it was observed in, with the
chat type, speaker, message id and session as its provenance and the role and the caller's
timestamp in its metadata.  Its content is the message as said (credentials redacted),
prefixed with who said it ("Caroline: ..."), so a search for a person finds what they said.
Every engine builds its episodes here (``episode_of``) and stores them as it stores memories.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memoryd import secrets
from memoryd.knowledge import expiry_phrases
from memoryd.store.conversation_records import SessionContext, SessionRef, StoredMessage
from memoryd.store.records import EPISODE, NewMemory, Provenance

#: The ``source`` label of an episode.
SOURCE = "conversation"


def author_of(message: StoredMessage, context: SessionContext) -> tuple[str | None, str | None]:
    """``(username, display_name)`` of who said it: the message's author, else (for the user's
    own messages) the session's speaker; ``(None, None)`` when nobody is named."""
    username, display_name = (message.username or "").lstrip("@") or None, message.display_name or None
    if not (username or display_name) and message.role == "user":
        username = (context.speaker_username or "").lstrip("@") or None
        display_name = context.speaker_display_name or None
    return username, display_name


def speaker_of(message: StoredMessage, context: SessionContext) -> str:
    """Who said it, as the episode's text names them: the author's display name, else their
    username, else the role."""
    username, display_name = author_of(message, context)
    return display_name or username or message.role


def episode_of(session: SessionRef, context: SessionContext, message: StoredMessage) -> NewMemory:
    metadata: dict[str, Any] = {"role": message.role}
    if message.sent_at is not None:
        metadata["sent_at"] = message.sent_at
    if message.user_id is not None:  # its author, when the caller named them (erasure finds it)
        metadata["author_user_id"] = message.user_id
    when = _when(message.sent_at, context.timezone)
    # A credential pasted into a chat never becomes a searchable memory: it is redacted here as
    # memory.add's redact mode would (the conversation log, read only by extraction, keeps the
    # message as sent; extraction screens what it stores).
    said = f"{speaker_of(message, context)}: {secrets.scan(message.content.strip()).text}"
    # The speaker the text names is the one recorded: ``source`` and ``trust`` follow from it.
    username, display_name = author_of(message, context)
    return NewMemory(
        content=f"[{when}] {said}" if when else said,
        owner=session.owner,
        chat_id=session.chat_id,
        shared=False,
        source=SOURCE,
        metadata=metadata,
        provenance=Provenance(
            chat_type=context.chat_type,
            source_username=username,
            source_display_name=display_name,
            source_message_id=message.message_id,
            source_session=session.session_key,
            memory_type=EPISODE,
        ),
    )


def _when(sent_at: str | float | None, timezone: str | None) -> str:
    """The caller's timestamp as people write it ("8 May 2023, 1:56 pm"), in the caller's
    timezone when known: an episode's text says when it was said.  "" when there is none."""
    if sent_at is None:
        return ""
    try:
        if isinstance(sent_at, (int, float)):
            moment = datetime.fromtimestamp(float(sent_at), tz=UTC)
        else:
            moment = datetime.fromisoformat(sent_at.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return ""
    zone = expiry_phrases.zone(timezone)
    if zone is not None:
        moment = moment.astimezone(zone)
    hour = moment.hour % 12 or 12
    return f"{moment.day} {moment:%B %Y}, {hour}:{moment:%M} {'am' if moment.hour < 12 else 'pm'}"
