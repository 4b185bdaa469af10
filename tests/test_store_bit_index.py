"""Store: the in-memory copies of big vector partitions (``bit_index.py``) must scan exactly the
rows vec0 scans, with the same distances, and must never be used once a vector of their
partition was written or deleted."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import apsw
import numpy as np
import pytest

from memoryd.store import Scope
from memoryd.store.records import Provenance
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.schema import ladder as schema
from memoryd.store.sqlite.vectors import bit_index, hamming_scan, vector_codec, vector_search, vectors
from memoryd.store.sqlite.vectors.bit_index import BitIndex
from memoryd.store.sqlite.visibility_sql import vector_filters
from memoryd.store.visibility import vector_branches
from tests.store_helpers import back_to_schema_12, embed_all, note, random_units, reading, sql

T = TypeVar("T")

DIM = 384
ALICE = 600
#: Chats whose ids differ only after their first 12 characters.
GROUPS = ("-1001234567890", "-1001234567891")


def provenance_of(i: int) -> Provenance:
    """Every disclosure code the rules tell apart, spread over alice's memories."""
    chat_type = ("private", "group", None)[i % 3]
    return Provenance(
        chat_type=chat_type,
        sensitivity="sensitive" if i % 5 == 0 else None,
        conversation_private=i % 7 == 0,
    )


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> Iterator[BitIndex]:
    """The process's index, copying partitions from 100 vectors (the store reads it), each
    copy read by the search that finds it due, and again as soon as it is due again."""
    index = BitIndex(min_vectors=100, background=False, reread_pause=0)
    monkeypatch.setattr(bit_index, "BIT_INDEX", index)
    yield index


async def make_store(path: Path) -> Store:
    store = Store(path)
    store.configure_vector_space("test:bits", DIM)
    now = int(time.time() * 1000)
    texts = [f"alice memory {i}" for i in range(ALICE)]
    for i, text in enumerate(texts):
        chat = (GROUPS[i % 2] if i % 3 == 1 else "p1") if i % 3 != 2 else None
        expires = now - 1000 if i % 11 == 0 else (now + 3_600_000 if i % 13 == 0 else None)
        await store.memories.add(note(text, chat_id=chat, expires_at_ms=expires, provenance=provenance_of(i)))
    for i in range(20):
        await store.memories.add(note(f"bob memory {i}", "bob"))
    stored = random_units(ALICE + 20, 1)
    await embed_all(store, dict(zip(texts + [f"bob memory {i}" for i in range(20)], stored, strict=True)))
    return store


SCOPES = [
    Scope("alice"),
    Scope("alice", "p1", chat_type="private"),
    Scope("alice", GROUPS[0], chat_type="group"),
    Scope("alice", GROUPS[1], chat_type="group", this_chat=True),
    Scope("alice", "unknown-chat", chat_type="group"),
]


def read(path: Path, run: Callable[[apsw.Connection], T]) -> T:
    """``run`` in one read transaction of a connection of the test's own on the store's file."""
    with reading(path) as db, db:
        return run(db)


def knn(store: Store, scope: Scope, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    def run(db):  # type: ignore[no-untyped-def]
        space = vectors.read_space(db)
        return vector_search.knn(db, space, scope, query, depth=k, coarse_k=k, now_ms=int(time.time() * 1000))

    return read(store.path, run)


def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    """The same rowids in the same order, the same cosines (up to float rounding: the rescoring
    matrix is built in another order)."""
    return [r for r, _ in a] == [r for r, _ in b] and np.allclose([c for _, c in a], [c for _, c in b], atol=1e-6)


def warm(store: Store, scope: Scope) -> None:
    """Two searches: the second reads the copy (a new stamp must be seen twice)."""
    for _ in range(2):
        knn(store, scope, random_units(1, 99)[0], 8)


def tied_at(db: apsw.Connection, space: vectors.VectorSpace, bits: bytes, distance: float, sql_filter: str,
            params: tuple[object, ...]) -> set[int]:  # fmt: skip
    """Every row of alice's partition passing the filter at ``distance`` from ``bits`` (vec0 asked
    for all its rows)."""
    rows = db.execute(
        f"SELECT memory_rowid, distance FROM {space.table} WHERE coarse MATCH vec_bit(?) AND k = 4096 "
        f"AND scope_key = 'u:alice' AND {sql_filter}",
        (bits, *params),
    ).fetchall()
    return {r for r, d in rows if d == distance}


async def test_the_copy_scans_the_rows_vec0_scans_with_every_filter(tmp_path: Path, copies: BitIndex) -> None:
    with await make_store(tmp_path / "m.db") as store:
        warm(store, Scope("alice"))

        def compare(db):  # type: ignore[no-untyped-def]
            space = vectors.read_space(db)
            copy = copies.copy_for(db, space, "u:alice")
            (vectored,) = db.execute(
                "SELECT count(*) FROM memories WHERE scope_key = 'u:alice' AND vector_gen IS NOT NULL"
            ).fetchone()
            assert copy is not None and len(copy.rowids) == vectored > ALICE // 2
            now = int(time.time() * 1000)
            ties = 0
            for scope in SCOPES:
                for (sql_filter, params), (codes, chat) in zip(
                    vector_filters(scope, now), vector_branches(scope), strict=True
                ):
                    for query in random_units(10, 2):
                        bits = vector_codec.coarse(query)
                        plain = hamming_scan.scan(
                            db, space.table, bits, 64, "u:alice", sql_filter, params, hints=hamming_scan.HammingHints()
                        )
                        mine = copy.nearest(bits, 64, now, codes, chat)
                        # The same distances; the same rows nearer than the k-th distance; at
                        # the k-th, rows vec0 may have cut otherwise.  Within a distance the
                        # copy keeps rowid order.
                        assert [d for _, d in mine] == [d for _, d in plain]
                        kth = plain[-1][1] if len(plain) == 64 else float("inf")
                        assert {r for r, d in mine if d < kth} == {r for r, d in plain if d < kth}
                        assert {r for r, d in plain if d == kth} <= tied_at(db, space, bits, kth, sql_filter, params)
                        assert {r for r, d in mine if d == kth} <= tied_at(db, space, bits, kth, sql_filter, params)
                        assert mine == sorted(mine, key=lambda row: (row[1], row[0]))
                        ties += len(plain) == 64 and sum(d == kth for _, d in plain) > 1

            assert ties > 10  # lists cut among rows at one distance: the order was tested

        read(store.path, compare)


async def test_knn_with_the_copy_equals_knn_without_it(tmp_path: Path, copies: BitIndex) -> None:
    """k above the partition's size: both return every row that passes, so the lists match exactly."""
    with await make_store(tmp_path / "m.db") as store:
        queries = random_units(5, 3)
        for scope in SCOPES:
            without = [knn(store, scope, q, 4096) for q in queries]
            warm(store, scope)
            with_copy = [knn(store, scope, q, 4096) for q in queries]
            assert all(same(a, b) for a, b in zip(with_copy, without, strict=True))
            assert all(result for result in with_copy)
        assert len(copies) == 1  # alice's partition; bob's 20 stay vec0's


async def test_a_written_or_deleted_vector_retires_the_copy(tmp_path: Path, copies: BitIndex) -> None:
    with await make_store(tmp_path / "m.db") as store:
        scope = Scope("alice")
        warm(store, scope)
        query = random_units(1, 4)[0]
        first = knn(store, scope, query, 4096)

        # The nearest memory goes: the copy's stamp is old, so vec0 scans (and never returns it).
        (memory_id,) = sql(tmp_path / "m.db", "SELECT id FROM memories WHERE rowid = ?", (first[0][0],))[0]
        assert await store.memories.delete(scope, memory_id) == memory_id
        after_delete = knn(store, scope, query, 4096)
        assert first[0][0] not in [r for r, _ in after_delete]
        warm(store, scope)  # a fresh copy, read at the new stamp
        assert same(knn(store, scope, query, 4096), after_delete)

        # A new memory with the query's own vector comes first.
        await store.memories.add(note("the newest memory"))
        await embed_all(store, {}, query)
        (rowid,) = sql(tmp_path / "m.db", "SELECT rowid FROM memories WHERE content = 'the newest memory'")[0]
        assert knn(store, scope, query, 4096)[0][0] == rowid
        warm(store, scope)
        assert knn(store, scope, query, 4096)[0][0] == rowid


async def test_a_new_stamp_is_copied_only_when_seen_twice_and_small_partitions_never(
    tmp_path: Path, copies: BitIndex
) -> None:
    with await make_store(tmp_path / "m.db") as store:

        def copy_of(partition: str):  # type: ignore[no-untyped-def]
            return read(store.path, lambda db: copies.copy_for(db, vectors.read_space(db), partition))

        assert copy_of("u:alice") is None
        key = (str(tmp_path / "m.db"), "vec_g1", "u:alice")
        assert copies.claim_read(key)  # another reader is reading it
        assert not copies.claim_read(key)
        assert copy_of("u:alice") is None
        copies.release_read(key)
        first = copy_of("u:alice")
        assert first is not None
        assert copy_of("u:alice") is first
        assert copy_of("u:bob") is None and copy_of("u:bob") is None

        await store.memories.add(note("one more"))
        await embed_all(store, {}, random_units(1, 5)[0])
        assert copy_of("u:alice") is None  # stale, and its new stamp seen once
        second = copy_of("u:alice")
        assert second is not None and second.stamp != first.stamp and len(second.rowids) == len(first.rowids) + 1


async def test_a_store_of_schema_8_gets_the_stamps_table_and_its_copies_stay_exact(
    tmp_path: Path, copies: BitIndex
) -> None:
    path = tmp_path / "m.db"
    with await make_store(path):
        pass
    back_to_schema_12(path)
    sql(path, "DROP TABLE vector_epochs")
    sql(path, f"PRAGMA user_version = {schema.version_before(schema.m009_vector_epochs)}")
    with Store(path) as upgraded:
        upgraded.configure_vector_space("test:bits", DIM)
        assert sql(path, "PRAGMA user_version") == [(schema.LATEST,)]
        assert sql(path, "SELECT count(*) FROM vector_epochs WHERE scope_key = ''") == [(1,)]
        query = random_units(1, 6)[0]
        without = knn(upgraded, Scope("alice"), query, 4096)
        warm(upgraded, Scope("alice"))
        assert len(copies) > 0
        assert same(knn(upgraded, Scope("alice"), query, 4096), without)


async def test_sign_bits_of_the_wrong_length_turn_the_copies_off(tmp_path: Path, copies: BitIndex) -> None:
    """A damaged ``vector_copies`` row: the copy is refused, vec0 scans."""
    path = tmp_path / "m.db"
    with await make_store(path):
        sql(
            path,
            "UPDATE vector_copies SET coarse = zeroblob(12) WHERE memory_rowid = (SELECT min(memory_rowid) FROM vector_copies)",
        )

        def copy_of(db):  # type: ignore[no-untyped-def]
            return copies.copy_for(db, vectors.read_space(db), "u:alice")

        assert read(path, copy_of) is None
        assert read(path, copy_of) is None  # the second sight tried, and refused
        assert copies.layout_mismatch and len(copies) == 0


async def test_a_copy_read_in_the_background_leaves_the_searches_to_vec0_until_it_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = BitIndex(min_vectors=100, reread_pause=0)
    monkeypatch.setattr(bit_index, "BIT_INDEX", index)
    with await make_store(tmp_path / "m.db") as store:
        query = random_units(1, 6)[0]
        without = knn(store, Scope("alice"), query, 4096)  # the stamp's first sight: vec0
        # Due: read in the background, and vec0 scans for this search.
        assert read(store.path, lambda db: index.copy_for(db, vectors.read_space(db), "u:alice")) is None
        index.settle(30)
        copy = read(store.path, lambda db: index.copy_for(db, vectors.read_space(db), "u:alice"))
        assert copy is not None and len(index) == 1
        assert same(knn(store, Scope("alice"), query, 4096), without)

        # After a write: vec0 until the new copy is read, in the background again.
        await store.memories.add(note("one more"))
        await embed_all(store, {}, random_units(1, 5)[0])
        for _ in range(2):
            assert read(store.path, lambda db: index.copy_for(db, vectors.read_space(db), "u:alice")) is None
        index.settle(30)
        fresh = read(store.path, lambda db: index.copy_for(db, vectors.read_space(db), "u:alice"))
        assert fresh is not None and fresh.stamp != copy.stamp and len(fresh.rowids) == len(copy.rowids) + 1

        # A read due at a stamp its own snapshot no longer shows (a write came between) leaves
        # no copy: the partition's next stamp makes it due again.
        def due_at_another_stamp(db):  # type: ignore[no-untyped-def]
            return index.copy_for(db, vectors.read_space(db), "u:alice", stamp=(1, 2))

        assert read(store.path, due_at_another_stamp) is None
        assert read(store.path, due_at_another_stamp) is None
        index.settle(30)
        assert read(store.path, due_at_another_stamp) is None
        index.settle(30)
        current = read(store.path, lambda db: index.copy_for(db, vectors.read_space(db), "u:alice"))
        assert current is fresh and len(index) == 1


async def test_a_copy_just_read_is_not_read_again_before_its_pause_is_over(tmp_path: Path) -> None:
    index = BitIndex(min_vectors=100, background=False, reread_pause=1e6)
    with await make_store(tmp_path / "m.db") as store:

        def copy_of(db):  # type: ignore[no-untyped-def]
            return index.copy_for(db, vectors.read_space(db), "u:alice")

        read(store.path, copy_of)
        first = read(store.path, copy_of)
        assert first is not None
        await store.memories.add(note("one more"))
        await embed_all(store, {}, random_units(1, 5)[0])
        for _ in range(3):  # due, but read a moment ago: vec0 scans (with no pause, the
            assert read(store.path, copy_of) is None  # second of these reads it: the tests above)
        assert len(index) == 1
