"""Store: how vectors are kept at scale (6-bit rescoring copies, schemas m008 and m012) and the bounded
hamming scan, whose hinted fast path must give what the plain scan gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memoryd.store import QueryVector, Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.db.database import open_connection
from memoryd.store.sqlite.schema import ladder as schema
from memoryd.store.sqlite.schema.migrations import vector_formats
from memoryd.store.sqlite.vectors import hamming_scan, vector_codec
from memoryd.store.sqlite.vectors.hamming_scan import HammingHints, scan
from tests.store_helpers import back_to_schema_12, embed_all, int8_copy, note, random_units, reading, sql

DIM = 384


def test_the_six_bit_copy_keeps_the_cosine_within_a_few_thousandths() -> None:
    stored, queries = random_units(200, 1), random_units(20, 2)
    # Related pairs too, not only the near-zero cosines of random vectors.
    stored[:20] = queries + 0.3 * random_units(20, 3)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    blobs = [vector_codec.fine(row) for row in stored]
    assert {len(blob) for blob in blobs} == {DIM * 3 // 4}
    assert vector_codec.fine_many(stored) == blobs
    for query in queries:
        error = np.abs(vector_codec.cosines(blobs, query, DIM) - stored @ query)
        assert error.max() < 0.01  # int8's: 0.004 (vector_codec.py has the figures on MiniLM vectors)
    assert np.abs(vector_codec.unit_from_fine(blobs[0], DIM) - stored[0]).max() < 0.01


def six_bit_levels(blob: bytes) -> np.ndarray:
    """The 6-bit copy's components (-31..31), unpacked by hand: four per three bytes."""
    bits = np.unpackbits(np.frombuffer(blob, dtype=np.uint8)).reshape(-1, 6)
    return bits @ (1 << np.arange(5, -1, -1)) - 31


def test_the_six_bit_copy_is_the_vector_scaled_to_its_largest_component() -> None:
    vector = random_units(1, 7)[0]
    levels = six_bit_levels(vector_codec.fine(vector))
    assert np.array_equal(levels, np.rint(vector * 31 / np.abs(vector).max()))
    assert np.abs(levels).max() == 31


def test_an_int8_copy_is_read_and_the_upgrade_converts_it_to_the_six_bit_copy() -> None:
    stored, query = random_units(40, 8), random_units(1, 9)[0]
    int8 = [int8_copy(row) for row in stored]
    six_bit = [vector_codec.fine(row) for row in stored]
    mixed = [old if i % 2 else new for i, (old, new) in enumerate(zip(int8, six_bit, strict=True))]
    for blobs in (int8, mixed):
        assert np.abs(vector_codec.cosines(blobs, query, DIM) - stored @ query).max() < 0.01
    converted = vector_formats.six_bit_from_int8(int8, DIM)
    assert {len(blob) for blob in converted} == {DIM * 3 // 4}
    # Rounded twice (float -> int8 -> 6 bits), a component may move by one step, no more.
    steps = [np.abs(six_bit_levels(a) - six_bit_levels(b)).max() for a, b in zip(converted, six_bit, strict=True)]
    assert max(steps) <= 1


@pytest.mark.parametrize("dim", [1, 2, 3, 4, 5, 7])
def test_small_dimensions_round_trip(dim: int) -> None:
    """Padding to whole groups of four; dim 3 keeps int8 (its 6-bit copy would be as long)."""
    vectors = np.random.default_rng(dim).standard_normal((30, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    blobs = vector_codec.fine_many(vectors)
    assert {len(blob) for blob in blobs} <= set(vector_codec.readable_lengths(dim))
    assert np.abs(vector_codec.cosines(blobs, vectors[0], dim) - vectors @ vectors[0]).max() < 0.05


def test_the_upgrade_converts_a_float16_copy_to_the_int8_copy_of_the_same_vector() -> None:
    stored = random_units(50, 4)
    old = [row.astype(np.float16).tobytes() for row in stored]
    converted = vector_formats.int8_from_float16(old, DIM)
    direct = [int8_copy(row) for row in stored]
    differing = [
        int(np.abs(np.frombuffer(a, np.int8).astype(int) - np.frombuffer(b, np.int8)).max())
        for a, b in zip(converted, direct, strict=True)
    ]
    assert max(differing) <= 1  # float16 rounding may move a component by one step, no more


@pytest.fixture
def big_partition(tmp_path: Path) -> Path:
    """A vec0 table shaped like the store's, 3000 rows in partition 'big' and 5 in 'small'."""
    path = tmp_path / "scan.db"
    db = open_connection(path, busy_timeout_ms=5000)
    db.execute(
        f"CREATE VIRTUAL TABLE vec_t USING vec0 (memory_rowid INTEGER PRIMARY KEY, scope_key TEXT PARTITION KEY, "
        f"expires_at INTEGER, coarse BIT[{DIM}], chunk_size = 512)"
    )
    rows = random_units(3005, 5)
    with db:
        db.executemany(
            "INSERT INTO vec_t VALUES (?, ?, ?, vec_bit(?))",
            [(i + 1, "big" if i < 3000 else "small", i % 7, vector_codec.coarse(v)) for i, v in enumerate(rows)],
        )
    db.close()
    return path


def test_the_hinted_scan_returns_the_plain_scans_rows(big_partition: Path) -> None:
    hints = HammingHints()
    with reading(big_partition) as db:
        for query in random_units(40, 6):
            bits = vector_codec.coarse(query)
            plain = scan(db, "vec_t", bits, 64, "big", "expires_at > ?", (1,), hints=HammingHints())
            hinted = scan(db, "vec_t", bits, 64, "big", "expires_at > ?", (1,), hints=hints)
            assert len(hinted) == len(plain) == 64
            assert [d for _, d in hinted] == [d for _, d in plain]
            # Apart from rows tied at the k-th distance, the very same rows.
            kth = plain[-1][1]
            assert {r for r, d in hinted if d < kth} == {r for r, d in plain if d < kth}
            assert all(r <= 3000 and (r - 1) % 7 > 1 for r, _ in hinted)
        key = (db.filename, "vec_t", "big", "expires_at > ?")
        assert hints.get(key) is not None  # the fast path was taken


def test_a_hint_too_tight_falls_back_to_the_full_scan(big_partition: Path) -> None:
    hints = HammingHints()
    with reading(big_partition) as db:
        key = (db.filename, "vec_t", "big", "1")
        hints.learn(key, 0.0)  # no vector is that near
        query = random_units(1, 7)[0]
        rows = scan(db, "vec_t", vector_codec.coarse(query), 64, "big", "1", (), hints=hints)
        assert len(rows) == 64
        assert rows == scan(db, "vec_t", vector_codec.coarse(query), 64, "big", "1", (), hints=HammingHints())
        assert hints.get(key) == rows[-1][1] > 0


def test_a_partition_smaller_than_k_returns_all_its_rows_and_leaves_no_hint(big_partition: Path) -> None:
    hints = HammingHints()
    with reading(big_partition) as db:
        rows = scan(db, "vec_t", vector_codec.coarse(random_units(1, 8)[0]), 64, "small", "1", (), hints=hints)
        assert sorted(r for r, _ in rows) == [3001, 3002, 3003, 3004, 3005]
        assert hints.get((db.filename, "vec_t", "small", "1")) is None


def test_hints_forget_the_oldest_partition_past_their_bound() -> None:
    hints = HammingHints()
    for i in range(5000):
        hints.learn(("f", "t", str(i), "1"), 10.0)
    assert hints.get(("f", "t", "0", "1")) is None
    assert hints.get(("f", "t", "4999", "1")) == 10.0


def test_the_bound_is_the_farthest_of_the_recent_scans() -> None:
    hints, key = HammingHints(), ("f", "t", "p", "1")
    hints.learn(key, 100.0)
    hints.learn(key, 120.0)
    hints.learn(key, 90.0)
    assert hints.get(key) == 120.0
    for _ in range(hamming_scan.RECENT - 1):
        hints.learn(key, 95.0)
    assert hints.get(key) == 95.0  # 120 has left the window


async def test_a_store_with_float16_copies_is_migrated_to_six_bit_and_ranks_the_same(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    stored = random_units(30, 9)
    query = stored[3] + 0.5 * random_units(1, 10)[0]
    query /= np.linalg.norm(query)
    with Store(path) as store:
        store.configure_vector_space("test:m008", DIM)
        texts = [f"memory number {i}" for i in range(30)]
        for text in texts:
            await store.memories.add(note(text))
        await embed_all(store, dict(zip(texts, stored, strict=True)))
    # Back to schema 7: the rescoring copies as float16, as m001-m007 wrote them.
    vectors_of = {text: stored[i] for i, text in enumerate(texts)}
    content_of = dict(sql(path, "SELECT m.rowid, m.content FROM memories AS m"))
    back_to_schema_12(path, lambda rowid, _: vectors_of[content_of[rowid]].astype(np.float16).tobytes())
    sql(path, f"PRAGMA user_version = {schema.version_before(schema.m008_int8_rescoring_copies)}")
    assert sql(path, "SELECT DISTINCT length(embedding) FROM vec_g1") == [(2 * DIM,)]

    with Store(path) as upgraded:
        upgraded.configure_vector_space("test:m008", DIM)  # the same space: nothing to re-embed
        assert sql(path, "SELECT DISTINCT length(fine) FROM vector_copies") == [(vector_codec.fine_length(DIM),)]
        assert sql(path, "SELECT count(*) FROM vector_copies") == sql(path, "SELECT count(*) FROM vec_g1") == [(30,)]
        assert sql(path, "PRAGMA user_version") == [(schema.LATEST,)]
        assert (await upgraded.jobs.backlog())["embed"] == 0
        hits = await upgraded.memories.search(Scope("alice"), "", limit=5, vector=QueryVector.at_hand(query))
    exact = stored @ query
    expected = np.argsort(-exact)[:5]
    # The same five, the best first; the 2nd and 3rd are 0.0002 apart, below the 6-bit copy's
    # error (~0.001), so their order is the copy's.
    assert hits[0].content == texts[expected[0]]
    assert {h.content for h in hits} == {texts[i] for i in expected}
    for hit in hits:
        assert hit.similarity == pytest.approx(float(exact[texts.index(hit.content)]), abs=0.01)


async def test_a_rescoring_copy_of_the_wrong_length_is_found_and_re_embedded(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Store(path) as store:
        store.configure_vector_space("test:check", DIM)
        await store.memories.add(note("a memory"))
        await embed_all(store, {}, random_units(1, 11)[0])
        sql(path, "UPDATE vector_copies SET fine = zeroblob(?) WHERE memory_rowid = 1", (2 * DIM,))  # float16-sized
        findings = store.lifecycle.check()
        assert not next(f for f in findings if f.check == "vectors.rows").ok
        store.lifecycle.repair(findings)
        assert (await store.jobs.backlog())["embed"] == 1
        assert sql(path, "SELECT count(*) FROM vec_g1") == sql(path, "SELECT count(*) FROM vector_copies") == [(0,)]


async def test_a_copy_without_its_vec0_row_or_with_other_sign_bits_is_found_and_re_embedded(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Store(path) as store:
        store.configure_vector_space("test:check", DIM)
        for text in ("first memory", "second memory", "third memory"):
            await store.memories.add(note(text))
        await embed_all(store, {}, random_units(1, 12)[0])
        assert all(finding.ok for finding in store.lifecycle.check())
        sql(path, "DELETE FROM vec_g1 WHERE memory_rowid = 1")  # the copy stays behind
        sql(path, "UPDATE vector_copies SET coarse = zeroblob(?) WHERE memory_rowid = 2", (DIM // 8,))
        findings = store.lifecycle.check()
        rows = next(f for f in findings if f.check == "vectors.rows")
        assert not rows.ok and rows.count >= 2
        store.lifecycle.repair(findings)
        assert sql(path, "SELECT memory_rowid FROM vector_copies ORDER BY 1") == [(3,)]
        assert sql(path, "SELECT memory_rowid FROM vec_g1 ORDER BY 1") == [(3,)]
        assert (await store.jobs.backlog())["embed"] == 2
        await embed_all(store, {}, random_units(1, 13)[0])
        assert all(finding.ok for finding in store.lifecycle.check())
