"""The visibility rules of ``memoryd.store.visibility`` as SQL: every retriever's WHERE clause.

Every retriever (list, get, delete, short ids, keyword, vector KNN, the final fetch of a
search) builds its WHERE clause from :func:`predicate` (the vec0 scan from
:func:`vector_filters`), so a visibility rule is written once, here, from the rules as data
(``Scope``, ``Disclosure``, ``visible_codes``).
"""

from __future__ import annotations

from memoryd.errors import BrokenInvariant
from memoryd.store.visibility import Scope, codes_in, disclosure_terms, vector_branches

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


#: ``memories.disclosure`` (schema m007) computes :meth:`Disclosure.code` in SQL.
DISCLOSURE_SQL = (
    "(CASE WHEN chat_type IN ('group', 'supergroup') THEN 2 WHEN chat_type = 'private' THEN 1 ELSE 0 END)"
    " + 3 * (sensitivity IS 'sensitive') + 6 * conversation_private"
)


def disclosure_clause(scope: Scope, alias: str = "memories") -> Clause:
    """The disclosure rules for ``scope`` as SQL over table ``alias``."""
    terms = disclosure_terms(scope, alias, "?")
    if terms is None:
        return "1", ()
    parts, params = terms
    return (f"({' OR '.join(parts)})", params) if parts else ("0", ())


def predicate(
    scope: Scope,
    alias: str = "memories",
    *,
    now_ms: int,
    include_expired: bool = False,
    include_deleted: bool = False,
    include_superseded: bool = False,
    key: str | None = None,
) -> Clause:
    """What ``scope`` may see of table ``alias``: its keys (or the one ``key`` of them, for the
    queries that walk one scope key at a time), live memories only (``include_deleted``: a list
    cursor may name a memory deleted since), and what the disclosure rules allow.  Superseded
    memories show when the scope or the query (ids: get, delete, history) asks for them."""
    if key is None:
        keys = scope.visible_keys()
        scope_sql = f"{alias}.scope_key IN ({', '.join('?' * len(keys))})"
    elif key in scope.visible_keys():
        keys = [key]
        scope_sql = f"{alias}.scope_key = ?"
    else:
        raise BrokenInvariant("a retriever asked for a scope key its caller cannot see")
    sql, params = scope_sql, tuple[object, ...](keys)
    if not include_deleted:
        live_sql, live_params = live(
            alias,
            now_ms=now_ms,
            include_expired=include_expired,
            include_superseded=include_superseded or scope.include_superseded,
        )
        sql, params = f"{sql} AND {live_sql}", (*params, *live_params)
    rule_sql, rule_params = disclosure_clause(scope, alias)
    if rule_sql != "1":
        sql, params = f"{sql} AND {rule_sql}", (*params, *rule_params)
    return sql, params


def vector_filters(scope: Scope, now_ms: int) -> list[Clause]:
    """The vec0 scan's share of :func:`predicate`, as alternatives whose union it is.

    vec0 filters metadata inside the KNN only for AND-ed comparisons (an OR is applied after
    the top-k, which would starve the results), so the "learned here" branch of the rules is a
    scan of its own.  Deleted memories leave the vector table; vec0 metadata cannot be NULL, so
    "never expires" is ``vectors.NEVER`` and "learned in no chat" is ``''``.
    """
    filters: list[Clause] = []
    for codes, learned_chat in vector_branches(scope):
        if learned_chat is None:
            filters.append((f"expires_at > ? AND {codes_in('disclosure', codes)}", (now_ms,)))
        else:
            filters.append(
                (f"expires_at > ? AND learned_chat = ? AND {codes_in('disclosure', codes)}", (now_ms, learned_chat))
            )
    return filters
