"""Store: vector spaces, the model-mismatch guard and reindex generations."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.errors import EmbeddingModelMismatch
from memoryd.store import QueryVector, Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.vectors import vector_codec, vector_search, vectors
from tests.store_helpers import embed_all, note, reading, sql, unit

ALICE = Scope("alice")


def vec_tables(path: Path) -> set[str]:
    query = "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%vec0%'"
    return {name for (name,) in sql(path, query)}


async def embed_everything(store: Store, dim: int) -> int:
    return await embed_all(store, lambda content: unit(dim))


def test_first_configuration_records_the_space(store: Store) -> None:
    assert store.vector_space() is None
    store.configure_vector_space("local:all-MiniLM-L6-v2", 384)
    space = store.vector_space()
    assert space is not None
    assert (space.model, space.dim, space.generation) == ("local:all-MiniLM-L6-v2", 384, 1)
    assert vec_tables(store.path) == {"vec_g1"}


def test_the_same_space_again_is_a_no_op(store: Store) -> None:
    store.configure_vector_space("m", 8)
    store.configure_vector_space("m", 8)
    assert store.vector_space().generation == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(("model", "dim"), [("other", 8), ("m", 16)])
def test_another_model_or_dimension_is_refused_naming_reindex(store: Store, model: str, dim: int) -> None:
    store.configure_vector_space("m", 8)
    with pytest.raises(EmbeddingModelMismatch, match="memoryd reindex"):
        store.configure_vector_space(model, dim)
    assert store.vector_space().model == "m"  # type: ignore[union-attr]


async def test_reindex_starts_a_new_generation_and_requeues_every_memory(store: Store) -> None:
    store.configure_vector_space("old", 8)
    for i in range(3):
        await store.memories.add(note(f"memory {i} about tea"))
    assert await embed_everything(store, 8) == 3
    assert (await store.jobs.backlog())["embed"] == 0

    store.request_reindex("new", 16)
    with pytest.raises(EmbeddingModelMismatch):
        store.configure_vector_space("new", 32)  # not the requested dimension
    store.configure_vector_space("new", 16)
    space = store.vector_space()
    assert (space.model, space.dim, space.generation) == ("new", 16, 2)  # type: ignore[union-attr]
    assert vec_tables(store.path) == {"vec_g2"}
    assert (await store.jobs.backlog())["embed"] == 3

    # During the backfill: keyword search works, and vectors of the old space are gone.
    assert len(await store.memories.search(ALICE, "tea", limit=10)) == 3
    assert await store.memories.search(ALICE, "", limit=10, vector=QueryVector.at_hand(unit(16))) == []
    # An old-space query vector is never compared with the new space.
    hits = await store.memories.search(ALICE, "tea", limit=10, vector=QueryVector.at_hand(unit(8)))
    assert len(hits) == 3 and all(h.similarity == 1.0 for h in hits)  # term fractions

    assert await embed_everything(store, 16) == 3
    assert len(await store.memories.search(ALICE, "", limit=10, vector=QueryVector.at_hand(unit(16)))) == 3
    # The request was consumed: the next configure with the same space is a no-op.
    store.configure_vector_space("new", 16)
    assert store.vector_space().generation == 2  # type: ignore[union-attr]


async def test_a_reindex_request_without_dimension_accepts_any(store: Store) -> None:
    store.configure_vector_space("old", 8)
    store.request_reindex("new", None)
    store.configure_vector_space("new", 24)
    assert store.vector_space().dim == 24  # type: ignore[union-attr]


async def test_reindexing_to_the_same_model_rebuilds_the_vectors(store: Store) -> None:
    store.configure_vector_space("m", 8)
    await store.memories.add(note("x"))
    await embed_everything(store, 8)
    store.request_reindex("m", 8)
    store.configure_vector_space("m", 8)
    assert store.vector_space().generation == 2  # type: ignore[union-attr]
    assert (await store.jobs.backlog())["embed"] == 1


async def test_a_vector_computed_for_an_old_generation_is_dropped(store: Store) -> None:
    store.configure_vector_space("old", 8)
    await store.memories.add(note("x"))
    [stale] = await store.jobs.claim_embed(10)
    store.request_reindex("new", 8)
    store.configure_vector_space("new", 8)
    await store.jobs.complete_embed([(stale, unit(8))])
    assert await store.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(unit(8))) == []
    [fresh] = await store.jobs.claim_embed(10)  # re-queued for the new generation
    assert fresh.generation == 2
    await store.jobs.complete_embed([(fresh, unit(8))])
    assert len(await store.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(unit(8)))) == 1


async def test_the_vector_space_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Store(path) as first:
        first.configure_vector_space("m", 8)
        await first.memories.add(note("kept"))
        await embed_everything(first, 8)
    with Store(path) as second:
        with pytest.raises(EmbeddingModelMismatch):
            second.configure_vector_space("other", 8)
        second.configure_vector_space("m", 8)
        assert len(await second.memories.search(ALICE, "", limit=5, vector=QueryVector.at_hand(unit(8)))) == 1


async def test_memories_added_before_any_embedder_get_queued_when_one_appears(store: Store) -> None:
    await store.memories.add(note("early"))
    assert (await store.jobs.backlog())["embed"] == 0
    store.configure_vector_space("m", 8)
    assert (await store.jobs.backlog())["embed"] == 1


async def test_rescoring_copies_are_read_for_exactly_the_rows_vec0_holds_after_writes_and_deletes(store: Store) -> None:
    # cosines_for reads vector_copies: a copy for each row vec0 holds, and none for a deleted
    # memory's (its vector went with it) or a rowid without a memory.
    store.configure_vector_space("test:m", 4)
    records = [(await store.memories.add(note(f"memory number {i}" + "!" * i)))[0] for i in range(12)]
    await embed_all(store, lambda text: unit(4, 1.0, float(len(text)), 0.5, -1.0))
    for record in records[:3]:
        await store.memories.delete(Scope("alice"), record.id)
    query = unit(4, 0.3, 1.0, -0.2, 0.4)
    with reading(store.path) as db, db:
        space = vectors.read_space(db)
        assert space is not None
        rowids = [rowid for (rowid,) in db.execute("SELECT rowid FROM memories")] + [10_000]
        marks = ",".join("?" * len(rowids))
        in_vec0 = [
            r for (r,) in db.execute(f"SELECT memory_rowid FROM {space.table} WHERE memory_rowid IN ({marks})", rowids)
        ]
        through_vec0 = {
            rowid: db.execute("SELECT fine FROM vector_copies WHERE memory_rowid = ?", (rowid,)).fetchone()[0]
            for rowid in sorted(in_vec0)
        }
        assert db.execute("SELECT count(*) FROM vector_copies").fetchone()[0] == len(in_vec0)
        found = vector_search.cosines_for(db, space, rowids, query)
    assert len(through_vec0) == 9  # the 3 deleted memories have no vector
    cosines = vector_codec.cosines(list(through_vec0.values()), query, space.dim)
    assert found == dict(zip(through_vec0, (float(c) for c in cosines), strict=True))
