"""The people retriever: a search's third ranked list, beside BM25 and vectors.

"what does my wife like?" mentions Sarah; her memories ("Sarah likes Italian food") never say
"wife", so neither BM25 nor a vector may find them.  The service finds the mentioned people
(``knowledge.MentionFinder``, cached per owner) and hands their rowids here as a
:class:`PeopleFocus`; this module ranks their visible memories newest first for the fusion.
A query that mentions nobody gets no focus and costs nothing here but :func:`annotate`.

It also answers the ``about`` filter (only memories linked to given people) and fills each
record's ``about`` with the names of the caller's own people it is linked to.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw
import msgspec

from memoryd.store import search_rules
from memoryd.store.people_records import PeopleFocus
from memoryd.store.query_terms import by_shared_words
from memoryd.store.records import MemoryRecord
from memoryd.store.sqlite.memories import lookup
from memoryd.store.sqlite.people import people
from memoryd.store.visibility import Scope

_encode = msgspec.json.encode

#: The newest memories of the mentioned people that the retriever ranks.
RANK_POOL = 200


def ranking(db: apsw.Connection, scope: Scope, focus: PeopleFocus | None, depth: int, now_ms: int) -> list[int]:
    """Rowids of the focused people's visible memories (at most ``depth``): those sharing more
    of the rest of the query first ("like" finds "Sarah likes Italian food" before "Sarah's
    birthday is in May"), newest first among equals; only the newest RANK_POOL are looked at."""
    if focus is None or not focus.ranked_people:
        return []
    pool = people.texts_about(db, scope, focus.ranked_people, now_ms, limit=RANK_POOL)
    pool = by_shared_words(pool, focus.rest)  # stable: newest first among equals
    return [rowid for rowid, _ in pool[:depth]]


def restrict(db: apsw.Connection, focus: PeopleFocus | None, fused: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """With an ``about`` filter, keep only the fused rowids linked to those people."""

    def linked(people: list[int], rowids: list[int]) -> list[int]:
        return [
            int(rowid)
            for (rowid,) in db.execute(
                "SELECT DISTINCT memory_rowid FROM memory_people WHERE person_rowid IN (SELECT value FROM json_each(?)) "
                "AND memory_rowid IN (SELECT value FROM json_each(?))",
                (_encode(people).decode(), _encode(rowids).decode()),
            )
        ]

    return search_rules.restrict(focus, fused, linked)


def annotate(db: apsw.Connection, scope: Scope, records: Iterable[MemoryRecord]) -> None:
    """Set ``about`` of each record to the caller's people it is linked to; a record linked to
    none keeps its subjects there.  What a record says of a newer memory that replaced it is
    kept only when ``scope`` may see that memory (``lookup.hide_unseen_successors``): every
    path that answers records (list, get, search, person.get, summaries) comes through here."""
    by_id = {record.id: record for record in records}
    lookup.hide_unseen_successors(db, scope, by_id.values())
    for memory_id, names in people.names_for(db, scope.user_id, list(by_id)).items():
        by_id[memory_id].about = names
