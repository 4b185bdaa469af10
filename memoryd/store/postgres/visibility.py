"""The visibility rules of ``memoryd.store.visibility`` as PostgreSQL WHERE clauses.

The same rules as the SQLite backend's, composed by ``store.visibility_clauses`` from the same
data (``Scope``, ``Disclosure`` codes, ``visible_codes``): every query of this backend that
shows memories to a caller builds its WHERE clause here.
"""

from __future__ import annotations

from memoryd.store.visibility_clauses import Clause, ScopeClauses


def live(alias: str = "m", *, now_ms: int, include_expired: bool = False, include_superseded: bool = False) -> Clause:
    sql = f"{alias}.deleted_at_ms IS NULL"
    if not include_superseded:
        sql += f" AND {alias}.superseded_by IS NULL"
    if include_expired:
        return sql, ()
    return f"{sql} AND ({alias}.expires_at_ms IS NULL OR {alias}.expires_at_ms > %s)", (now_ms,)


def _keys_in(alias: str, keys: list[str]) -> Clause:
    return f"{alias}.scope_key = ANY(%s)", (keys,)


_CLAUSES = ScopeClauses(alias="m", placeholder="%s", always="true", never="false", keys_in=_keys_in, live=live)
disclosure_clause = _CLAUSES.disclosure_clause
#: What ``scope`` may see of table ``alias`` (one scope key of it with ``key``).
predicate = _CLAUSES.predicate
