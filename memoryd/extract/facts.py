"""The shapes of extraction: what the model is asked to return (:class:`ExtractionResult`), and
what survives the filters (:class:`Fact`).

The reply types are strict about types (a string where a number belongs fails the decode and
the call is retried) but tolerant of what is merely missing or out of range: optional fields
have defaults, and enums and ranges are only *advertised* in the JSON schema
(``extra_json_schema``), so one fact with ``"memory_type": "hobby"`` or ``"confidence": 1.2``
does not throw away a whole reply.  :mod:`memoryd.extract.filters` clamps or drops those.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

import msgspec
from msgspec import Meta

from memoryd.store.records import Sensitivity as Sensitivity  # re-exported: extract's callers name it from here

MemoryType = Literal["preference", "identity", "relationship", "knowledge", "context", "event", "task", "observation"]
MEMORY_TYPES: tuple[MemoryType, ...] = get_args(MemoryType)
SENSITIVITIES: tuple[Sensitivity, ...] = get_args(Sensitivity)

#: Types that stop mattering, and their lifetime in days when the model gives none (ash's TTLs).
EPHEMERAL_TTL_DAYS: dict[MemoryType, int] = {"context": 7, "event": 30, "task": 14, "observation": 3}


class ExtractedFact(msgspec.Struct, kw_only=True):
    """One fact as the model states it."""

    content: str
    memory_type: Annotated[str, Meta(extra_json_schema={"enum": list(MEMORY_TYPES)})]
    confidence: Annotated[float, Meta(extra_json_schema={"minimum": 0, "maximum": 1})]
    subjects: list[str] = []
    sensitivity: Annotated[str, Meta(extra_json_schema={"enum": list(SENSITIVITIES)})] = "personal"
    expires_days: Annotated[float, Meta(extra_json_schema={"minimum": 1})] | None = None
    shared: bool = False
    speaker: str | None = None
    aliases: dict[str, list[str]] = {}


class ExtractionResult(msgspec.Struct, kw_only=True):
    """The model's whole reply."""

    facts: list[ExtractedFact] = []


class Fact(msgspec.Struct, kw_only=True, frozen=True):
    """A fact that passed every filter, normalized, ready to be stored."""

    content: str
    memory_type: MemoryType
    confidence: float
    #: The people it is about other than the owner (ash's convention: [] means the owner).
    subjects: list[str]
    sensitivity: Sensitivity
    #: Days until it expires, for ephemeral types; None for durable ones.
    expires_days: int | None
    #: A fact about the group (store it as a group memory of the chat), not about one person.
    shared: bool
    #: Who stated it (a username, without "@"), when the model could tell.
    speaker: str | None
    #: Other names a subject goes by, as stated in the conversation ({"Sukhpreet": ["SK"]}).
    aliases: dict[str, list[str]]
    #: True when secrets were replaced by "[redacted]" (extraction.secrets = "redact").
    redacted: bool = False
