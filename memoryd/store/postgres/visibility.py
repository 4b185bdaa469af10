"""The visibility rules of ``memoryd.store.visibility`` as PostgreSQL WHERE clauses.

The same rules as the SQLite backend's ``visibility_sql.py``, from the same data (``Scope``,
``Disclosure`` codes, ``visible_codes``): every query of this backend that shows memories to a
caller builds its WHERE clause here.
"""

from __future__ import annotations

from memoryd.errors import BrokenInvariant
from memoryd.store.visibility import Scope, disclosure_terms

Clause = tuple[str, tuple[object, ...]]


def live(alias: str = "m", *, now_ms: int, include_expired: bool = False, include_superseded: bool = False) -> Clause:
    sql = f"{alias}.deleted_at_ms IS NULL"
    if not include_superseded:
        sql += f" AND {alias}.superseded_by IS NULL"
    if include_expired:
        return sql, ()
    return f"{sql} AND ({alias}.expires_at_ms IS NULL OR {alias}.expires_at_ms > %s)", (now_ms,)


def disclosure_clause(scope: Scope, alias: str = "m") -> Clause:
    terms = disclosure_terms(scope, alias, "%s")
    if terms is None:
        return "true", ()
    parts, params = terms
    return (f"({' OR '.join(parts)})", params) if parts else ("false", ())


def predicate(
    scope: Scope,
    alias: str = "m",
    *,
    now_ms: int,
    include_expired: bool = False,
    include_deleted: bool = False,
    include_superseded: bool = False,
    key: str | None = None,
) -> Clause:
    """What ``scope`` may see of table ``alias`` (one scope key of it with ``key``)."""
    params: tuple[object, ...]
    if key is None:
        keys: list[str] = scope.visible_keys()
        sql, params = f"{alias}.scope_key = ANY(%s)", (keys,)
    elif key in scope.visible_keys():
        sql, params = f"{alias}.scope_key = %s", (key,)
    else:
        raise BrokenInvariant("a retriever asked for a scope key its caller cannot see")
    if not include_deleted:
        live_sql, live_params = live(
            alias,
            now_ms=now_ms,
            include_expired=include_expired,
            include_superseded=include_superseded or scope.include_superseded,
        )
        sql, params = f"{sql} AND {live_sql}", (*params, *live_params)
    rule_sql, rule_params = disclosure_clause(scope, alias)
    if rule_sql != "true":
        sql, params = f"{sql} AND {rule_sql}", (*params, *rule_params)
    return sql, params
