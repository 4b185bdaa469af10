"""Typed params of every method; msgspec rejects unknown fields and wrong types by name.

Limits live here as msgspec ``Meta`` constraints, so the error a caller gets names the field.
Checks msgspec cannot express (byte length, NUL characters, id prefixes) are in
``validation.py``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from memoryd.store.records import Sensitivity

MAX_CONTENT_BYTES = 16 * 1024
MAX_QUERY_BYTES = 16 * 1024
MAX_METADATA_BYTES = 4 * 1024
MAX_SOURCE_BYTES = 64
MAX_SUBJECT_BYTES = 800
#: memory.list pages deeper than this go by ``before_id`` (an offset costs its length in rows,
#: and limit + offset must stay a 64-bit integer for SQLite).
MAX_LIST_OFFSET = 1_000_000

Identity = Annotated[str, Meta(min_length=1, max_length=256)]
#: A routing field as ash sends it: its env var's text, "" or null when unset.
RoutingText = Annotated[str, Meta(max_length=256)]
SubjectName = Annotated[str, Meta(min_length=1, max_length=200)]


class CallerParams(Struct, kw_only=True, forbid_unknown_fields=True):
    """Fields every method accepts: the caller's identity, and ash's routing fields.

    The routing fields are what ash's sandbox CLI sends with every call.  ``chat_type`` feeds
    the disclosure rules, the speaker and message the provenance of what memory.add stores,
    ``this_chat`` narrows search and list; the others are accepted and ignored.  In token mode
    the token's claims stand for the typed ones (``memoryd.auth.Authenticator.identify``).
    ``user_id`` is optional here because a verified ``context_token`` can supply it; whether it
    is required is decided in one place, ``Authenticator.identify`` (via ``caller_scope``).
    """

    user_id: Identity | None = None
    chat_id: Identity | None = None
    context_token: str | None = None
    chat_type: RoutingText | None = None
    provider: Any = None
    thread_id: Any = None
    session_key: Any = None
    message_id: RoutingText | int | None = None  # a chat platform's message ids are often numbers
    source_username: RoutingText | None = None
    source_display_name: RoutingText | None = None
    username: Any = None
    current_user_message: Any = None
    timezone: Any = None
    chat_title: Any = None
    this_chat: bool | None = None


class AddParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    content: str
    source: Annotated[str, Meta(min_length=1, max_length=64)] = "agent"
    expires_days: Annotated[float, Meta(gt=0, le=36500)] | None = None
    subjects: Annotated[list[SubjectName], Meta(max_length=32)] = []
    shared: bool = False
    metadata: dict[str, Any] | None = None
    sensitivity: Sensitivity | None = None
    conversation_private: bool = False
    #: The id (or unique prefix) of a visible memory of the same scope that this one replaces.
    supersedes: Annotated[str, Meta(min_length=1, max_length=64)] | None = None
    #: An upsert key (navi's category/key): a live memory with the same key and subjects in the
    #: same scope is superseded.
    key: Annotated[str, Meta(min_length=1, max_length=200)] | None = None


#: A relevance threshold (store/relevance.py): the estimated probability that a memory helps.
Relevance = Annotated[float, Meta(ge=0, le=1)]


class SearchParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    query: str
    limit: Annotated[int, Meta(ge=1, le=100)] = 10
    #: Hits below this relevance are left out; None: store/relevance.py's SEARCH_FLOOR.
    min_relevance: Relevance | None = None
    #: Only memories about this person: a name, an alias or a relationship ("my wife").
    about: SubjectName | None = None
    include_superseded: bool = False


class ListParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    limit: Annotated[int, Meta(ge=1, le=1000)] = 20
    offset: Annotated[int, Meta(ge=0, le=MAX_LIST_OFFSET)] = 0
    before_id: str | None = None
    include_expired: bool = False
    about: SubjectName | None = None
    include_superseded: bool = False


class DeleteParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    memory_id: Annotated[str, Meta(min_length=1, max_length=64)]


class GetParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    memory_id: Annotated[str, Meta(min_length=1, max_length=64)]


class HistoryParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    memory_id: Annotated[str, Meta(min_length=1, max_length=64)]


class HealthParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    # Health is also called by monitoring that has no user: it never resolves an identity.
    pass


#: memory.observe: messages per call; extract_from_messages: messages per call.
MAX_OBSERVE_MESSAGES = 100
MAX_EXTRACT_MESSAGES = 200
ShortText = Annotated[str, Meta(max_length=256)]


class MessageParam(Struct, kw_only=True, forbid_unknown_fields=True):
    """One conversation message (``content``: at most MAX_CONTENT_BYTES, checked in validation)."""

    role: Literal["user", "assistant"]
    content: str
    id: ShortText | int | None = None
    #: ISO 8601, or seconds since the epoch.
    timestamp: datetime | float | None = None
    username: ShortText | None = None
    display_name: ShortText | None = None
    user_id: ShortText | None = None


class ObserveParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    messages: Annotated[list[MessageParam], Meta(min_length=1, max_length=MAX_OBSERVE_MESSAGES)]
    session_key: Annotated[str, Meta(min_length=1, max_length=256)] | None = None


class ExtractFromMessagesParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    messages: Annotated[list[MessageParam], Meta(min_length=1, max_length=MAX_EXTRACT_MESSAGES)]
    shared: bool = False


class ExtractParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    """ash's `memory extract` sends its routing fields: the message id may be missing (None)."""

    message_id: Annotated[str, Meta(min_length=1, max_length=256)] | int | None = None
    session_key: Annotated[str, Meta(max_length=256)] | None = None
    shared: bool = False
