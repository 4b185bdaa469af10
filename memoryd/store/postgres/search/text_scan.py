"""The retriever of a query made only of symbols: the caller's memories holding its text.

Per visible scope key, the newest ``symbol_match.SCAN_ROWS`` memories the caller sees are read
through the ``memories_scope_time`` index, newest first, and tested with ``strpos``: the
``terms`` index has no token for a symbol, and the cost stays bounded in a scope of any size.
"""

from __future__ import annotations

from typing import Any

from memoryd.store.postgres.visibility import predicate
from memoryd.store.symbol_match import SCAN_ROWS
from memoryd.store.visibility import Scope


def holding_statement(scope: Scope, text: str, depth: int, now_ms: int) -> tuple[str, list[Any]]:
    """The statement whose rows are the rowids of the caller's memories whose content holds
    ``text``, newest first (at most ``depth``), among the newest SCAN_ROWS of each scope key
    the caller sees."""
    windows: list[str] = []
    params: list[Any] = []
    for key in scope.visible_keys():
        visible, visible_params = predicate(scope, "m", now_ms=now_ms, key=key)
        windows.append(
            "(SELECT m.rowid, m.content, m.created_at_ms FROM memories AS m "
            f"WHERE {visible} ORDER BY m.created_at_ms DESC, m.rowid DESC LIMIT %s)"
        )
        params.extend([*visible_params, SCAN_ROWS])
    sql = (
        f"SELECT w.rowid FROM ({' UNION ALL '.join(windows)}) AS w WHERE strpos(w.content, %s) > 0 "
        "ORDER BY w.created_at_ms DESC, w.rowid DESC LIMIT %s"
    )
    return sql, [*params, text, depth]
