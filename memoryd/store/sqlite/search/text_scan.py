"""The retriever of a query made only of symbols: the caller's memories holding its text.

Per visible scope key, the newest ``symbol_match.SCAN_ROWS`` memories the caller sees are read
through the ``memories_scope_time`` index, newest first, and tested with ``instr``: the keyword
index has no token for a symbol, and the cost stays bounded in a scope of any size.
"""

from __future__ import annotations

import apsw

from memoryd.store.sqlite.visibility_sql import predicate
from memoryd.store.symbol_match import SCAN_ROWS
from memoryd.store.visibility import Scope


def holding(db: apsw.Connection, scope: Scope, text: str, depth: int, now_ms: int) -> list[int]:
    """Rowids of the caller's memories whose content holds ``text``, newest first (at most
    ``depth``), among the newest SCAN_ROWS of each scope key the caller sees."""
    found: list[tuple[int, int]] = []
    for key in scope.visible_keys():
        visible, params = predicate(scope, "m", now_ms=now_ms, key=key)
        found.extend(
            (int(created), int(rowid))
            for rowid, created in db.execute(
                f"""
                SELECT rowid, created_at_ms FROM (
                    SELECT m.rowid, m.content, m.created_at_ms FROM memories AS m
                    WHERE {visible} ORDER BY m.created_at_ms DESC, m.rowid DESC LIMIT ?
                ) WHERE instr(content, ?) > 0
                LIMIT ?
                """,
                (*params, SCAN_ROWS, text, depth),
            )
        )
    found.sort(reverse=True)
    return [rowid for _, rowid in found[:depth]]
