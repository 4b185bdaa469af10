"""Who may see which memory: the caller (``Scope``), the scope keys, and the SQL that says it.

Every retriever (list, get, delete, short ids, keyword, vector KNN, the final fetch of a
search) builds its WHERE clause from :func:`predicate`, so a visibility rule is written once,
here.  Superseded memories are hidden unless the caller asks for them (``Scope.include_superseded``,
a clause of ``live``).  Rules to come (disclosure by chat type, provenance and sensitivity;
``this_chat``) are added as fields of ``Scope`` and clauses of ``predicate``.

A memory lives in one scope key: ``u:<owner>`` (personal) or ``c:<chat_id>`` (group).  A caller
sees its own personal key plus the group key of its current chat, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memoryd.errors import BrokenInvariant

ScopeKind = Literal["personal", "group"]

PERSONAL_PREFIX = "u:"
GROUP_PREFIX = "c:"


def personal_key(user_id: str) -> str:
    return PERSONAL_PREFIX + user_id


def group_key(chat_id: str) -> str:
    return GROUP_PREFIX + chat_id


def scope_kind(shared: bool) -> ScopeKind:
    """The wire name of a memory's scope."""
    return "group" if shared else "personal"


def kind_of_key(scope_key: str) -> ScopeKind:
    return scope_kind(not scope_key.startswith(PERSONAL_PREFIX))


def key_for(*, shared: bool, owner: str, chat_id: str | None) -> str:
    """The scope key a memory is stored under (a shared memory needs its chat)."""
    if shared:
        if chat_id is None:
            raise BrokenInvariant("a shared (group) memory needs a chat_id")
        return group_key(chat_id)
    return personal_key(owner)


@dataclass(frozen=True, slots=True)
class Scope:
    """Who is asking: a user, optionally inside a chat.

    The caller sees its own personal memories plus the group memories of ``chat_id``.
    """

    user_id: str
    chat_id: str | None = None
    #: Also show memories that a newer one superseded (search and list's ``include_superseded``).
    include_superseded: bool = False

    def __post_init__(self) -> None:
        # An invariant, not input validation (the service checks input): an empty user would
        # be the personal key "u:", which nobody owns.
        if not self.user_id:
            raise BrokenInvariant("a scope needs a user_id")

    def visible_keys(self) -> list[str]:
        """The scope keys (vec0 partition values) this caller may read."""
        keys = [personal_key(self.user_id)]
        if self.chat_id is not None:
            keys.append(group_key(self.chat_id))
        return keys


#: A WHERE fragment and its bindings, in order.
Clause = tuple[str, tuple[object, ...]]


def live(
    alias: str = "memories", *, now_ms: int, include_expired: bool = False, include_superseded: bool = False
) -> Clause:
    """The "live memory" predicate: not deleted and (unless asked otherwise) neither superseded
    nor expired."""
    sql = f"{alias}.deleted_at_ms IS NULL"
    if not include_superseded:
        sql = f"{sql} AND {alias}.superseded_by IS NULL"
    if include_expired:
        return sql, ()
    return f"{sql} AND ({alias}.expires_at_ms IS NULL OR {alias}.expires_at_ms > ?)", (now_ms,)


def predicate(
    scope: Scope,
    alias: str = "memories",
    *,
    now_ms: int,
    include_expired: bool = False,
    include_superseded: bool = False,
    key: str | None = None,
) -> Clause:
    """What ``scope`` may see of table ``alias``: its keys (or the one ``key`` of them, for the
    queries that walk one scope key at a time) and live memories only.  Superseded memories
    show when the scope or the query (ids: get, delete, history) asks for them."""
    if key is None:
        keys = scope.visible_keys()
        scope_sql = f"{alias}.scope_key IN ({', '.join('?' * len(keys))})"
    elif key in scope.visible_keys():
        keys = [key]
        scope_sql = f"{alias}.scope_key = ?"
    else:
        raise BrokenInvariant("a retriever asked for a scope key its caller cannot see")
    live_sql, live_params = live(
        alias,
        now_ms=now_ms,
        include_expired=include_expired,
        include_superseded=include_superseded or scope.include_superseded,
    )
    return f"{scope_sql} AND {live_sql}", (*keys, *live_params)


def vector_filter(now_ms: int) -> Clause:
    """The vec0 scan's share of the live predicate (deleted memories leave the vector table;
    vec0 metadata cannot be NULL, so "never expires" is stored as ``vectors.NEVER``)."""
    return "expires_at > ?", (now_ms,)
