"""Who said a memory, and whether that makes it a fact or hearsay (ash's ``source``/``trust``).

A memory is a ``fact`` when its speaker is talking about themselves (no subjects, or the
speaker is one of them), ``hearsay`` when someone else is the subject, and ``unknown`` when no
speaker was recorded.  Subjects are the names memory.add was given (ash's ``about``); the
speaker matches one when a subject equals their username or display name, case-insensitively.
"""

from __future__ import annotations

from typing import Literal

Trust = Literal["fact", "hearsay", "unknown"]


def speaker_name(username: str | None, display_name: str | None) -> str | None:
    """How ash names a speaker: the display name, else the username."""
    return display_name or username or None


def trust_of(username: str | None, display_name: str | None, subjects: list[str]) -> Trust:
    if not (username or display_name):
        return "unknown"
    if not subjects:
        return "fact"
    speaker = {name.casefold() for name in (username, display_name) if name}
    return "fact" if any(subject.casefold() in speaker for subject in subjects) else "hearsay"
