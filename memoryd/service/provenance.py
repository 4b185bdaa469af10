"""The caller's chat and speaker, from params or token claims, into a Scope and a Provenance.

``caller_scope`` asks the authenticator who is calling with the routing params as
sent; what comes back (the params in trust mode, the token's claims in token mode) decides the
disclosure rules of the call (``Scope.chat_type``) and what memory.add records of a memory.
"""

from __future__ import annotations

import dataclasses

from memoryd.auth import Authenticator, Caller, Routing
from memoryd.rpc.dispatch import CallContext
from memoryd.service.params import AddParams, CallerParams
from memoryd.service.validation import check_text
from memoryd.store import Provenance, Scope


def _text(field: str, value: str | None) -> str | None:
    # ash sends an unset env var as null, a set-but-empty one as "": both mean unknown.  What is
    # kept is stored with what the call writes, so it must be text every engine can store.
    text = check_text(field, value, allow_blank=True).strip() if value is not None else ""
    return text or None


def routing_of(params: CallerParams) -> Routing:
    """The routing params as sent, blank ones as None (-32602 for text no engine can store)."""
    return Routing(
        chat_type=_text("chat_type", params.chat_type),
        source_username=_text("source_username", params.source_username),
        source_display_name=_text("source_display_name", params.source_display_name),
        message_id=_text("message_id", None if params.message_id is None else str(params.message_id)),
    )


def scope_of(caller: Caller, params: CallerParams) -> Scope:
    return Scope(
        user_id=caller.user_id,
        chat_id=caller.chat_id,
        chat_type=caller.routing.chat_type,
        this_chat=bool(params.this_chat),
        verified=caller.verified,
    )


def adding_scope(caller: Caller, params: CallerParams) -> Scope:
    """The scope of a call that stores memories (memory.add, the extract methods): ``this_chat``
    narrows what search and list show, never what an add may match as a duplicate or supersede
    (without a chat it would match nothing, not even the memory's own duplicate)."""
    return dataclasses.replace(scope_of(caller, params), this_chat=False)


def provenance_of(caller: Caller, params: AddParams) -> Provenance:
    """Where the memory is learned (the memory's chat_id is the caller's chat) and who said it."""
    routing = caller.routing
    return Provenance(
        chat_type=routing.chat_type,
        source_username=routing.source_username,
        source_display_name=routing.source_display_name,
        source_message_id=routing.message_id,
        sensitivity=params.sensitivity,
        conversation_private=params.conversation_private,
    )


def identify(params: CallerParams, ctx: CallContext, authenticator: Authenticator) -> Caller:
    """The identity a call acts as: every memory.* method starts here, and nowhere else decides it."""
    return authenticator.identify(
        ctx,
        user_id=params.user_id,
        chat_id=params.chat_id,
        context_token=params.context_token,
        routing=routing_of(params),
    )


def caller_scope(params: CallerParams, ctx: CallContext, authenticator: Authenticator) -> Scope:
    """What the caller may see: its identity, and its chat for the disclosure rules."""
    return scope_of(identify(params, ctx, authenticator), params)


def owner_names(scope: Scope, *spoken_as: object) -> tuple[str, ...]:
    """The names the owner goes by: its id and the names it spoke under (those given as text).
    People learning never makes them a person."""
    return (scope.user_id, *(name for name in spoken_as if isinstance(name, str)))
