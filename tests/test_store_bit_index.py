"""Store: the in-memory copies of big vector partitions (``bit_index.py``) must scan exactly what
vec0 scans, and must never be used once a vector of their partition was written or deleted."""

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
from tests.store_helpers import embed_all, note, random_units, reading, sql

T = TypeVar("T")

DIM = 384
ALICE = 600
#: Longer than the 12 bytes vec0 keeps in its chunks, and the same in those 12.
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
    """The process's index, copying partitions from 100 vectors (the store reads it)."""
    index = BitIndex(min_vectors=100)
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
                        # The same rows in the same order: of those tied at a distance (at the
                        # k-th too), the ones vec0 keeps, across its two chunks of 512 as well.
                        assert mine == [(r, d) for r, _, d in plain]
                        ties += len(plain) == 64 and sum(d == plain[-1][2] for _, _, d in plain) > 1

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
        copies._loading.add(key)  # another reader is reading it
        assert copy_of("u:alice") is None
        copies._loading.discard(key)
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
    with await make_store(path) as store:
        pass
    sql(path, "DROP TABLE vector_epochs")
    sql(path, f"PRAGMA user_version = {schema.MIGRATIONS.index(schema.m009_vector_epochs)}")
    with Store(path) as upgraded:
        upgraded.configure_vector_space("test:bits", DIM)
        assert sql(path, "PRAGMA user_version") == [(len(schema.MIGRATIONS),)]
        assert sql(path, "SELECT count(*) FROM vector_epochs WHERE scope_key = ''") == [(1,)]
        query = random_units(1, 6)[0]
        without = knn(upgraded, Scope("alice"), query, 4096)
        warm(upgraded, Scope("alice"))
        assert len(copies) > 0
        assert same(knn(upgraded, Scope("alice"), query, 4096), without)


async def test_chunks_laid_out_otherwise_turn_the_copies_off(tmp_path: Path, copies: BitIndex) -> None:
    """Another sqlite-vec could lay its chunks out differently: the copy is refused, vec0 scans."""
    path = tmp_path / "m.db"
    with await make_store(path) as store:
        first_chunk = "(SELECT min(rowid) FROM vec_g1_metadatachunks01)"
        sql(path, f"UPDATE vec_g1_metadatachunks01 SET data = zeroblob(12) WHERE rowid = {first_chunk}")

        def copy_of(db):  # type: ignore[no-untyped-def]
            return copies.copy_for(db, vectors.read_space(db), "u:alice")

        assert read(path, copy_of) is None
        assert read(path, copy_of) is None  # the second sight tried, and refused
        assert copies.layout_mismatch and len(copies) == 0
