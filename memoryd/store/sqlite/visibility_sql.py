"""The visibility rules of ``memoryd.store.visibility`` as SQL: every retriever's WHERE clause.

Every retriever (list, get, delete, short ids, keyword, vector KNN, the final fetch of a
search) builds its WHERE clause from :func:`predicate` (the vec0 scan from
:func:`vector_filters`), so a visibility rule is written once, from the rules as data
(``Scope``, ``Disclosure``, ``visible_codes``), composed by ``store.visibility_clauses``.
"""

from __future__ import annotations

from memoryd.store.visibility import Scope, codes_in, vector_branches
from memoryd.store.visibility_clauses import Clause, ScopeClauses


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


def _keys_in(alias: str, keys: list[str]) -> Clause:
    return f"{alias}.scope_key IN ({', '.join('?' * len(keys))})", tuple(keys)


_CLAUSES = ScopeClauses(alias="memories", placeholder="?", always="1", never="0", keys_in=_keys_in, live=live)
#: The disclosure rules for ``scope`` as SQL over table ``alias``.
disclosure_clause = _CLAUSES.disclosure_clause
#: What ``scope`` may see of table ``alias`` (``ScopeClauses.predicate``).
predicate = _CLAUSES.predicate


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
