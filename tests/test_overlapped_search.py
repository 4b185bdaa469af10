"""The overlapped search (keyword part during the query's embedding, the KNN scan on a spare
reader) gives exactly the sequential search's hits, never waits for a second reader, and keeps
its keyword part and ranking in one snapshot."""

from __future__ import annotations

import random
import threading
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import apsw
import numpy as np
import pytest
import trio

from memoryd.store import Provenance, QueryVector, Scope, SearchHit
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.db.database import Database
from memoryd.store.sqlite.search import neighbours, search, search_parts
from memoryd.store.sqlite.search.overlap_gate import REMEASURE_SECONDS, OverlapGate
from memoryd.store.sqlite.search.overlapped_search import VectorUnderWay
from memoryd.store.sqlite.vectors import vectors
from tests.store_helpers import Clock, embed_all, note, reading

DIM = 16
NOW = 1_800_000_000_000
ALICE = Scope("alice")
ALICE_IN_GROUP = Scope("alice", "chat-1", chat_type="group")
WORDS = ["tea", "garden", "lisbon", "cello", "train", "sister", "coffee", "peanuts", "river", "chess"]


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


def open_store(path: Path, clock: Clock, readers: int, overlap_from: int = 0) -> Store:
    """``overlap_from`` 0: every search overlaps its parts, however small the test's scopes."""
    return Store(path, readers=readers, clock=clock, overlap_from=overlap_from)


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Iterator[Store]:
    with open_store(tmp_path / "memory.db", clock, readers=3) as opened:
        yield opened


@pytest.fixture
async def store_below_line(tmp_path: Path, clock: Clock) -> AsyncIterator[Store]:
    """The filled store, with every scope below the overlap line."""
    with open_store(tmp_path / "memory.db", clock, readers=3, overlap_from=10_000) as opened:
        await fill(opened)
        yield opened


def vector_of(text: str) -> np.ndarray:
    """A fixed pseudo-random unit vector per text (near texts share words, not vectors); crc32,
    not hash(), so that every run of the suite searches the same vectors."""
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    vector = rng.standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


async def fill(store: Store, count: int = 120) -> None:
    """Conversations of a few words each (neighbours matter), personal and group memories,
    some learned in private chats (hidden in the group), some deleted."""
    rng = random.Random(7)
    store.configure_vector_space("test:m", DIM)
    ids = []
    for i in range(count):
        text = " ".join(rng.sample(WORDS, rng.randint(1, 3))) + ("?" if i % 4 == 0 else f" note {i}")
        group = i % 3 == 0
        provenance = Provenance(chat_type="private" if i % 5 == 1 else "group")
        record, _ = await store.memories.add(
            note(text, chat_id="chat-1" if group else None, shared=group, provenance=provenance)
        )
        ids.append(record.id)
    for memory_id in ids[2:60:9]:
        await store.memories.delete(ALICE_IN_GROUP, memory_id)
    await embed_all(store, vector_of)


def sequential(store: Store, scope: Scope, text: str, vector: np.ndarray | None, limit: int) -> list[SearchHit]:
    """The plain search, in one read transaction of a connection of the test's own."""
    with reading(store.path) as db, db:
        space = vectors.read_space(db)
        return search.search(db, scope, search_parts.SearchQuery(text, limit, vector, space, NOW))


def queries(count: int) -> list[tuple[str, np.ndarray | None]]:
    rng = random.Random(11)
    out: list[tuple[str, np.ndarray | None]] = []
    for i in range(count):
        text = " ".join(rng.sample(WORDS, rng.randint(1, 4))) if i % 5 else ""
        out.append((text, None if i % 4 == 1 else vector_of(f"query {i}")))
    return out


def same(fast: list[SearchHit], slow: list[SearchHit]) -> None:
    assert [(hit.id, hit.score, hit.similarity) for hit in fast] == [
        (hit.id, hit.score, hit.similarity) for hit in slow
    ]


@pytest.mark.parametrize("scope", [ALICE, ALICE_IN_GROUP], ids=["personal", "group chat"])
@pytest.mark.parametrize("limit", [3, 10])
async def test_a_known_vector_gives_the_sequential_hits(store: Store, scope: Scope, limit: int) -> None:
    await fill(store)
    checked = 0
    for text, vector in queries(30):
        fast = await store.memories.search(scope, text, limit=limit, vector=QueryVector.at_hand(vector))
        same(fast, sequential(store, scope, text, vector, limit))
        checked += bool(fast)
    assert checked > 20  # the queries find something: the comparison is not of empty lists


@pytest.mark.parametrize("scope", [ALICE, ALICE_IN_GROUP], ids=["personal", "group chat"])
async def test_a_vector_embedded_during_the_search_gives_the_sequential_hits(store: Store, scope: Scope) -> None:
    await fill(store)
    for text, vector in queries(30):

        async def embed(vector: np.ndarray | None = vector) -> np.ndarray | None:
            await trio.sleep(0.002)  # the keyword part runs meanwhile
            return vector

        fast = await store.memories.search(scope, text, limit=10, vector=QueryVector(embed))
        same(fast, sequential(store, scope, text, vector, 10))


async def test_an_embedder_giving_nothing_leaves_a_keyword_search(store: Store) -> None:
    await fill(store)

    async def nothing() -> None:
        return None

    fast = await store.memories.search(ALICE, "tea garden", limit=10, vector=QueryVector(nothing))
    assert fast
    same(fast, sequential(store, ALICE, "tea garden", None, 10))


@pytest.mark.parametrize("readers", [1, 2])
async def test_searches_never_wait_for_a_second_reader(tmp_path: Path, clock: Clock, readers: int) -> None:
    # More concurrent searches than readers: each holds one reader and takes a second only if
    # one is free at that moment; with readers=1 no search ever gets a spare one.
    with open_store(tmp_path / "memory.db", clock, readers=readers) as store:
        await fill(store)
        wanted = queries(24)
        found: dict[int, list[SearchHit]] = {}

        async def one(i: int) -> None:
            text, vector = wanted[i]
            found[i] = await store.memories.search(ALICE, text, limit=10, vector=QueryVector.at_hand(vector))

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for i in range(len(wanted)):
                    nursery.start_soon(one, i)
        for i, (text, vector) in enumerate(wanted):
            same(found[i], sequential(store, ALICE, text, vector, 10))


async def test_a_memory_added_while_the_query_is_embedded_is_not_half_seen(store: Store) -> None:
    # The keyword part and the ranking read one snapshot: a memory committed in between is in
    # neither (or, for a later search, in both), never found by one and checked by the other.
    await fill(store)
    text = "harpsichord lessons"
    before = sequential(store, ALICE, text, vector_of(text), 10)

    async def embed_while_adding() -> np.ndarray:
        await trio.sleep(0.5)  # the keyword part has taken its snapshot by now
        await store.memories.add(note(text))
        await embed_all(store, vector_of)
        return vector_of(text)

    during = await store.memories.search(ALICE, text, limit=10, vector=QueryVector(embed_while_adding))
    same(during, before)
    after = await store.memories.search(ALICE, text, limit=10, vector=QueryVector.at_hand(vector_of(text)))
    assert after[0].content == text


async def test_a_scan_from_another_state_of_the_vectors_is_scanned_again(store: Store) -> None:
    # A list from a reader that saw other vectors (here: before one more was added) would
    # rank without the newest memory; the ranking scans again in its own snapshot instead.
    await fill(store)
    query = search_parts.SearchQuery("", 10, vector_of("query"), None, NOW)
    with reading(store.path) as db:
        with db:
            query = search_parts.SearchQuery("", 10, query.vector, vectors.read_space(db), NOW)
            stale = search_parts.vector_part(db, ALICE, query)
        newest, _ = await store.memories.add(note("the very question"))
        await embed_all(store, lambda text: vector_of("query") if text == "the very question" else vector_of(text))
        with db:
            plain = search.search(db, ALICE, query)
            given_the_stale_list = search.search(db, ALICE, query, semantic=stale)
    assert plain[0].id == newest.id
    same(given_the_stale_list, plain)


def database(store: Store, readers: int) -> Database:
    """A Database of the test's own on the store's file (the store created the schema)."""
    db = Database(store.path, readers=readers, busy_timeout_ms=1000)
    db.open_readers()
    return db


async def test_a_spare_reader_is_none_while_every_reader_is_held(store: Store) -> None:
    db = database(store, readers=2)
    try:
        with trio.fail_after(10):
            async with db.snapshot(), db.spare_snapshot() as second:
                assert second is not None
                async with db.spare_snapshot() as third:
                    assert third is None
            # Both were given back.
            async with db.spare_snapshot() as first, db.spare_snapshot() as second:
                assert first is not None and second is not None
    finally:
        db.close()


def count_memories(connection: apsw.Connection) -> int:
    return int(connection.execute("SELECT count(*) FROM memories").fetchone()[0])


async def test_a_snapshot_reads_one_state_across_its_calls(store: Store) -> None:
    await store.memories.add(note("first"))
    db = database(store, readers=1)
    try:
        async with db.snapshot() as snapshot:
            seen = await snapshot.run(count_memories)
            await store.memories.add(note("second"))
            assert await snapshot.run(count_memories) == seen
            assert await snapshot.finish(count_memories) == seen
        async with db.snapshot() as snapshot:
            assert await snapshot.finish(count_memories) == seen + 1
    finally:
        db.close()


async def test_a_snapshot_left_early_gives_its_reader_back(store: Store) -> None:
    db = database(store, readers=1)
    try:
        with pytest.raises(ZeroDivisionError):
            async with db.snapshot() as snapshot:
                await snapshot.run(lambda connection: 1 // 0)
        with trio.fail_after(10):
            async with db.snapshot() as snapshot:
                assert await snapshot.finish(count_memories) == 0
    finally:
        db.close()


async def test_two_neighbourhoods_merged_are_the_neighbourhood_of_both(store: Store) -> None:
    # The keyword part reads its candidates' neighbourhood ahead; the ranking adds the vector
    # candidates' and merges: the same rows and links as one read of all the centres.
    await fill(store)
    with reading(store.path) as db:
        rowids = [int(r) for (r,) in db.execute("SELECT rowid FROM memories ORDER BY rowid")]
        rng = random.Random(5)
        for scope in (ALICE, ALICE_IN_GROUP):
            for _ in range(20):
                first, second = rng.sample(rowids, 8), rng.sample(rowids, 8)
                whole = neighbours.around(db, scope, [*first, *second], search_parts.REACH, NOW)
                parts = neighbours.around(db, scope, first, search_parts.REACH, NOW).merged(
                    neighbours.around(db, scope, second, search_parts.REACH, NOW)
                )
                assert (parts.rows, parts.before, parts.after, parts.centres) == (
                    whole.rows,
                    whole.before,
                    whole.after,
                    whole.centres,
                )
                assert whole.after  # the memories were added close together: they link


async def test_searches_waiting_for_their_embedding_leave_a_reader_free(tmp_path: Path, clock: Clock) -> None:
    # The embedder takes one query at a time: searches queued behind it must not hold every
    # reader idle, or a memory.list would wait for embeddings it has nothing to do with.
    with open_store(tmp_path / "memory.db", clock, readers=2) as store:
        await fill(store)
        release = trio.Event()
        text, vector = "tea garden", vector_of("tea garden")
        found: list[list[SearchHit]] = []

        async def slow_embedding() -> np.ndarray:
            await release.wait()
            return vector

        async def one() -> None:
            found.append(await store.memories.search(ALICE, text, limit=10, vector=QueryVector(slow_embedding)))

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(one)
            await trio.sleep(0.3)  # every search is waiting for its embedding by now
            with trio.fail_after(10):
                assert await store.memories.list(ALICE, limit=5)
            release.set()
        assert len(found) == 3
        for hits in found:  # the overlapped one and the ones that embedded first agree
            same(hits, sequential(store, ALICE, text, vector, 10))


@pytest.mark.parametrize("scope", [ALICE, ALICE_IN_GROUP], ids=["personal", "group chat"])
async def test_a_ranking_prepared_ahead_gives_the_sequential_hits(store: Store, scope: Scope) -> None:
    await fill(store)
    with reading(store.path) as db:
        for text, vector in queries(30):
            with db:
                query = search_parts.SearchQuery(text, 10, vector, vectors.read_space(db), NOW)
                words = search_parts.prepare_ranking(db, scope, search_parts.keyword_part(db, scope, query), NOW)
                semantic = search_parts.vector_part(db, scope, query)
                fast = search.search(db, scope, query, words=words, semantic=semantic)
            same(fast, sequential(store, scope, text, vector, 10))


@pytest.mark.parametrize("scope", [ALICE, ALICE_IN_GROUP], ids=["personal", "group chat"])
async def test_a_scope_below_the_overlap_line_gives_the_sequential_hits(store_below_line: Store, scope: Scope) -> None:
    # Below the line a search is one worker-thread call (the vector embedded first): the same hits.
    for text, vector in queries(30):

        async def embed(vector: np.ndarray | None = vector) -> np.ndarray | None:
            return vector

        same(
            await store_below_line.memories.search(scope, text, limit=10, vector=QueryVector.at_hand(vector)),
            sequential(store_below_line, scope, text, vector, 10),
        )
        same(
            await store_below_line.memories.search(scope, text, limit=10, vector=QueryVector(embed)),
            sequential(store_below_line, scope, text, vector, 10),
        )


async def test_the_overlap_gate_overlaps_the_scopes_counted_big_lately(store: Store) -> None:
    # alice: 80 personal memories, 5 deleted (the group scope hides 2 of the 7 ids fill deletes:
    # learned in private chats); chat-1: 40.
    await fill(store)
    now = [0.0]
    small, big = OverlapGate(76, clock=lambda: now[0]), OverlapGate(75, clock=lambda: now[0])
    with reading(store.path) as db:
        for gate in (small, big):
            assert not gate.worth_overlapping(ALICE) and gate.needs_count(ALICE)  # never counted
            gate.count(db, ALICE)
            assert not gate.needs_count(ALICE)
        assert not small.worth_overlapping(ALICE) and big.worth_overlapping(ALICE)  # 75 live
        assert not small.worth_overlapping(ALICE_IN_GROUP)  # another scope: not counted yet
        small.count(db, ALICE_IN_GROUP)
        assert small.worth_overlapping(ALICE_IN_GROUP)  # 75 + 40: the chat's memories count too
        now[0] += REMEASURE_SECONDS
        assert big.needs_count(ALICE) and not big.worth_overlapping(ALICE)  # stale: counted again
        assert OverlapGate(0).worth_overlapping(ALICE) and not OverlapGate(0).needs_count(ALICE)


def at_once(
    start: Callable[[], VectorUnderWay | None],
) -> Callable[[], Callable[[Callable[[], None]], np.ndarray | None] | None]:
    """A start-at-once whose wait takes no argument, as ``QueryVector.start_now`` (whose wait is
    handed the store's cancellation check)."""

    def start_now() -> Callable[[Callable[[], None]], np.ndarray | None] | None:
        wait = start()
        return None if wait is None else (lambda check_cancelled: wait())  # type: ignore[return-value]

    return start_now


async def not_awaited() -> np.ndarray | None:
    raise AssertionError("embed_query was awaited though the embedding had started at once")


@pytest.mark.parametrize("scope", [ALICE, ALICE_IN_GROUP], ids=["personal", "group chat"])
async def test_a_small_scope_searched_beside_its_embedding_gives_the_sequential_hits(
    store_below_line: Store, scope: Scope
) -> None:
    # The embedding started at once on a thread of the embedder's: one worker-thread call reads
    # the keyword part and its neighbourhood, then waits there for the vector.
    for text, vector in queries(30):
        waited_in: list[int] = []

        def start(vector: np.ndarray | None = vector, waited_in: list[int] = waited_in) -> VectorUnderWay:
            def wait() -> np.ndarray | None:
                waited_in.append(threading.get_ident())
                return vector

            return wait

        fast = await store_below_line.memories.search(
            scope, text, limit=10, vector=QueryVector(not_awaited, at_once(start))
        )
        same(fast, sequential(store_below_line, scope, text, vector, 10))
        assert waited_in and waited_in != [threading.get_ident()]  # in the reader's thread


async def test_an_embedding_that_cannot_start_at_once_is_awaited(store_below_line: Store) -> None:
    for text, vector in queries(10):
        awaited = []

        async def embed(
            vector: np.ndarray | None = vector, awaited: list[str] = awaited, text: str = text
        ) -> np.ndarray | None:
            awaited.append(text)
            return vector

        fast = await store_below_line.memories.search(
            ALICE, text, limit=10, vector=QueryVector(embed, at_once(lambda: None))
        )
        same(fast, sequential(store_below_line, ALICE, text, vector, 10))
        assert awaited == [text]


async def test_a_search_beside_its_embedding_leaves_a_reader_free(tmp_path: Path, clock: Clock) -> None:
    # A reader waiting in its thread for a slow embedding is one reader idle: only one search
    # may do that while another reader is free; the others await their embedding first.
    with open_store(tmp_path / "memory.db", clock, readers=2, overlap_from=10_000) as store:
        await fill(store)
        text, vector = "tea garden", vector_of("tea garden")
        in_thread, on_loop = threading.Event(), trio.Event()
        started: list[str] = []

        def start() -> VectorUnderWay:
            started.append(text)
            return lambda: vector if in_thread.wait(timeout=30) else None

        async def embed() -> np.ndarray:
            await on_loop.wait()
            return vector

        found: list[list[SearchHit]] = []

        async def one() -> None:
            found.append(await store.memories.search(ALICE, text, limit=10, vector=QueryVector(embed, at_once(start))))

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(one)
            try:
                await trio.sleep(0.3)  # every search is waiting for its vector by now
                with trio.fail_after(10):
                    assert await store.memories.list(ALICE, limit=5)
            finally:  # the searches end either way
                in_thread.set()
                on_loop.set()
        assert len(started) == 1 and len(found) == 3
        for hits in found:
            same(hits, sequential(store, ALICE, text, vector, 10))
