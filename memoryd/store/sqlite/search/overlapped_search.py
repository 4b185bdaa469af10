"""Hybrid search with its independent parts overlapped on the two cores.

A search is three parts (``search_parts.py``, ``search.py``): the keyword part (term counts, BM25, the people
retriever), which needs no vector; the KNN scan, which needs the query's vector; the ranking,
which needs both.  Run one after the other they add up: at 100k memories the embedding ~3 ms,
BM25 ~4 ms, the scan ~7 ms.  Here the keyword part starts at once, while the query is being
embedded (onnxruntime and SQLite both release the GIL), and the scan, once the vector is there,
runs on a second reader if one is free right now, while the main reader finishes the keyword
part and then reads the keyword candidates' neighbourhood (``search_parts.prepare_ranking``), which
the ranking reads first anyway.
Neither reader is ever waited for while another is held, and a search waiting for its embedding
holds a reader only while another stays free (else it embeds first, then reads, as before).
Small scopes (``overlap_gate.py``) are searched in one worker-thread call instead: there the
parts are short, and each extra thread call costs more than its part.  When the embedder can
start the query at once on a thread of its own (``StartEmbedding``: the local model, idle), the
call reads the keyword part and its neighbourhood meanwhile and then waits for the vector
(``_plain``); else the query is embedded first and the call searches after.

The keyword part and the ranking share one reader and one read transaction, so they see one
snapshot, as the sequential search does.  The scan on the second reader may see a commit more
or less: its list is used only when the scope's vectors were the same in both snapshots (their
stamps, ``search._comparable``), else the scan runs again on the main reader.  So the hits are
always those of the sequential ``search.search`` in the main snapshot
(tests/test_overlapped_search.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import apsw
import numpy as np
import numpy.typing as npt
import trio

from memoryd.store.records import SearchHit
from memoryd.store.sqlite.db.database import Database
from memoryd.store.sqlite.db.read_snapshot import ReadSnapshot
from memoryd.store.sqlite.search import search, search_parts
from memoryd.store.sqlite.search.overlap_gate import OverlapGate
from memoryd.store.sqlite.search.people_retriever import PeopleFocus
from memoryd.store.visibility import Scope

#: Gives the query's vector, or None for a keyword-only search (the embedder is down or slow).
EmbedQuery = Callable[[], Awaitable[npt.ArrayLike | None]]
#: Waits for a query's vector under way (None: keyword only), in the search's worker thread:
#: a trio worker thread, where it may raise trio.Cancelled when the search is cancelled.
VectorUnderWay = Callable[[], npt.ArrayLike | None]
#: Starts the query's embedding at once on a thread of the embedder's own and gives the wait
#: for it, or gives None when the embedder cannot start it right now.
StartEmbedding = Callable[[], VectorUnderWay | None]


async def run(
    db: Database,
    scope: Scope,
    query: search_parts.SearchQuery,
    people_focus: PeopleFocus | None = None,
    embed_query: EmbedQuery | None = None,
    gate: OverlapGate | None = None,
    start_embedding: StartEmbedding | None = None,
) -> list[SearchHit]:
    """``search.search``, with ``query.vector`` from ``embed_query`` when one is given (or
    from ``start_embedding``, in a small scope, when it can start).
    ``gate``: which scopes are big enough to overlap (None: every scope)."""
    if gate is not None and not gate.worth_overlapping(scope):
        # A small scope: one worker-thread call (overlap_gate.py says why).  Its reader may
        # wait for the embedding at the end: only while another reader stays free.
        if embed_query is not None and start_embedding is not None and db.can_spare(keep_free=1):
            vector_under_way = start_embedding()
            if vector_under_way is not None:
                return await db.read(_plain, gate, scope, query, people_focus, vector_under_way)
        if embed_query is not None:
            query = _with_vector(query, await embed_query())
        return await db.read(_plain, gate, scope, query, people_focus)
    if embed_query is None:
        if query.vector is None:
            return await db.read(search.search, scope, query, people_focus)  # nothing to overlap
        async with db.snapshot() as main:
            if not db.free_readers:  # no reader to scan on beside this one: one call
                return await main.finish(search.search, scope, query, people_focus)
            return await _overlapped(db, main, scope, query, people_focus, None)
    # The reader may wait idle for the embedding (the embedder takes one query at a time):
    # only while another reader stays free for everybody else.
    async with db.spare_snapshot(keep_free=1) as main:
        if main is not None:
            return await _overlapped(db, main, scope, query, people_focus, embed_query)
    return await db.read(search.search, scope, _with_vector(query, await embed_query()), people_focus)


async def _overlapped(
    db: Database,
    main: ReadSnapshot,
    scope: Scope,
    query: search_parts.SearchQuery,
    people_focus: PeopleFocus | None,
    embed_query: EmbedQuery | None,
) -> list[SearchHit]:
    words: search_parts.KeywordPart | None = None
    semantic: search_parts.VectorPart | None = None
    words_found = trio.Event()

    async def gather_words() -> None:
        nonlocal words
        words = await main.run(search_parts.keyword_part, scope, query, people_focus)
        words_found.set()

    async def prepare_ranking() -> None:
        nonlocal words
        await words_found.wait()
        assert words is not None
        words = await main.run(search_parts.prepare_ranking, scope, words, query.now_ms)

    async def scan_on_spare(query: search_parts.SearchQuery) -> None:
        nonlocal semantic
        async with db.spare_snapshot() as spare:
            if spare is None:
                return  # the ranking scans on the main reader
            async with trio.open_nursery() as beside:
                # The main reader would wait idle for the scan: meanwhile it reads what the
                # ranking reads first (the keyword candidates' neighbourhood), if it gets to.
                beside.start_soon(prepare_ranking)
                semantic = await spare.finish(search_parts.vector_part, scope, query)
                beside.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(gather_words)
        if embed_query is not None:
            # Not the neighbourhood too while the query is embedded: onnxruntime runs a query
            # on both cores and waits for its slower thread, so more work beside it costs more
            # than it saves (measured at 10k: -0.2 ms instead of -0.55 ms).
            query = _with_vector(query, await embed_query())
        if query.vector is not None:
            nursery.start_soon(scan_on_spare, query)
    return await main.finish(search.search, scope, query, people_focus, words=words, semantic=semantic)


def _plain(
    db: apsw.Connection,
    gate: OverlapGate,
    scope: Scope,
    query: search_parts.SearchQuery,
    people_focus: PeopleFocus | None,
    vector_under_way: VectorUnderWay | None = None,
) -> list[SearchHit]:
    """The sequential search in one worker-thread call; with ``vector_under_way``, its keyword
    part and that part's neighbourhood are read while the query is being embedded on the
    embedder's thread, then it waits for the vector.  (Unlike the overlapped path's, the
    neighbourhood pays here: it costs no thread call of its own.)"""
    if gate.needs_count(scope):
        gate.count(db, scope)
    words = None
    if vector_under_way is not None:
        words = search_parts.keyword_part(db, scope, query, people_focus)
        words = search_parts.prepare_ranking(db, scope, words, query.now_ms)
        query = _with_vector(query, vector_under_way())
    return search.search(db, scope, query, people_focus, words=words)


def _with_vector(query: search_parts.SearchQuery, vector: npt.ArrayLike | None) -> search_parts.SearchQuery:
    return dataclasses.replace(query, vector=None if vector is None else np.asarray(vector, np.float32))
