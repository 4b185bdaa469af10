"""The visibility rules (``visibility.py``) composed into one WHERE clause, for either engine.

Every retriever of an engine builds its WHERE clause from its ``ScopeClauses.predicate``: the
scope keys the caller sees (or one of them), live memories only, and what the disclosure rules
allow.  What differs between the SQL dialects is declared by each engine (its parameter mark,
boolean literals, how a list of scope keys is bound, and its live-memory clause), not branched
on here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from memoryd.errors import BrokenInvariant
from memoryd.store.visibility import Scope, disclosure_terms

#: A WHERE fragment and its bindings, in order.
Clause = tuple[str, tuple[object, ...]]


class LiveClause(Protocol):
    """The engine's "live memory" predicate over table ``alias``: not deleted and (unless asked
    otherwise) neither superseded nor expired."""

    def __call__(
        self, alias: str, *, now_ms: int, include_expired: bool = False, include_superseded: bool = False
    ) -> Clause: ...


@dataclass(frozen=True)
class ScopeClauses:
    """One engine's visibility clauses."""

    #: The memories table's alias when a query names none.
    alias: str
    #: The engine's parameter mark.
    placeholder: str
    #: The literals of a condition that always, or never, holds.
    always: str
    never: str
    #: ``alias.scope_key`` among these keys (the engine binds a list its own way).
    keys_in: Callable[[str, list[str]], Clause]
    live: LiveClause

    def disclosure_clause(self, scope: Scope, alias: str | None = None) -> Clause:
        """The disclosure rules for ``scope`` as SQL over table ``alias``."""
        terms = disclosure_terms(scope, alias or self.alias, self.placeholder)
        if terms is None:
            return self.always, ()
        parts, params = terms
        return (f"({' OR '.join(parts)})", params) if parts else (self.never, ())

    def predicate(
        self,
        scope: Scope,
        alias: str | None = None,
        *,
        now_ms: int,
        include_expired: bool = False,
        include_deleted: bool = False,
        include_superseded: bool = False,
        key: str | None = None,
    ) -> Clause:
        """What ``scope`` may see of table ``alias``: its keys (or the one ``key`` of them, for
        the queries that walk one scope key at a time), live memories only (``include_deleted``:
        a list cursor may name a memory deleted since), and what the disclosure rules allow.
        Superseded memories show when the scope or the query (ids: get, delete, history) asks."""
        alias = alias or self.alias
        if key is None:
            sql, params = self.keys_in(alias, scope.visible_keys())
        elif key in scope.visible_keys():
            sql, params = f"{alias}.scope_key = {self.placeholder}", (key,)
        else:
            raise BrokenInvariant("a retriever asked for a scope key its caller cannot see")
        if not include_deleted:
            live_sql, live_params = self.live(
                alias,
                now_ms=now_ms,
                include_expired=include_expired,
                include_superseded=include_superseded or scope.include_superseded,
            )
            sql, params = f"{sql} AND {live_sql}", (*params, *live_params)
        rule_sql, rule_params = self.disclosure_clause(scope, alias)
        if rule_sql != self.always:
            sql, params = f"{sql} AND {rule_sql}", (*params, *rule_params)
        return sql, params
