"""The PostgreSQL backend's vector search in big scopes: through the generation's HNSW index,
with the scope filter applied inside an iterative scan, finding what the exact search finds.

Vectors are clustered (a few topics, each memory near its topic's centre), as embeddings are:
with random unit vectors every neighbour is about equally far and recall means nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memoryd.store import NewMemory, QueryVector, Scope
from tests.postgres_server import shared

pytest.importorskip("psycopg")

from memoryd.store.postgres import PostgresStore  # noqa: E402
from memoryd.store.postgres import search as searching  # noqa: E402
from memoryd.store.postgres.search import vector_search  # noqa: E402

DIM = 32


@pytest.fixture
def store() -> Iterator[PostgresStore]:
    with PostgresStore(shared().fresh_database(), pool_size=2) as opened:
        opened.configure_vector_space("clusters:test", DIM)
        yield opened


def clustered(rng: np.random.Generator, count: int, centres: np.ndarray) -> np.ndarray:
    picks = centres[rng.integers(0, len(centres), count)]
    vectors = picks + 0.35 * rng.standard_normal((count, DIM))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


async def test_a_big_scope_is_searched_through_hnsw_with_the_recall_of_an_exact_search(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((8, DIM))
    store.memories.add_many(NewMemory(f"alice note {i}", "alice", None, False, "t") for i in range(600))
    store.memories.add_many(NewMemory(f"other note {i}", f"user{i % 5}", None, False, "t") for i in range(600))
    while claimed := await store.jobs.claim_embed(1000):
        await store.jobs.complete_embed(list(zip(claimed, clustered(rng, len(claimed), centres), strict=True)))
    queries = clustered(rng, 20, centres)

    async def top(query: np.ndarray) -> list[str]:
        hits = await store.memories.search(Scope("alice"), "", limit=10, vector=QueryVector.at_hand(query))
        return [hit.id for hit in hits]

    exact = [await top(q) for q in queries]
    monkeypatch.setattr(vector_search, "HNSW_FROM", 100)

    def plan(conn: object) -> str:
        return searching.explain_knn(conn, Scope("alice"), queries[0], 1, 64, 0)  # type: ignore[arg-type]

    assert searching.hnsw_index(1) in store.db.run_sync(plan)
    approximate = [await top(q) for q in queries]
    found = sum(len(set(a) & set(e)) for a, e in zip(approximate, exact, strict=True))
    assert found / sum(map(len, exact)) >= 0.95
    assert all(len(a) == 10 for a in approximate)  # the scope filter never starves the result


async def test_relevance_is_the_sqlite_engines_for_the_same_memories_and_query(tmp_path: Path) -> None:
    """Both engines compute ``relevance`` from the same ranking features: the same memories and
    keyword query give the same hits with the same relevance, and the same floor keeps the same
    hits.  With vectors the hits are the same and their relevance close: SQLite ranks with its
    quantized vector copies (cosines off by up to ~0.01), PostgreSQL with the float32 vectors."""
    from memoryd.store.sqlite import Store

    rng = np.random.default_rng(11)
    centres = rng.standard_normal((4, DIM))
    contents = [f"alice {topic} note number {i}" for i, topic in enumerate(["tea", "bicycle", "garden", "music"] * 10)]
    vectors = dict(zip(contents, clustered(rng, len(contents), centres), strict=True))
    queries = [
        ("garden", None), ("green tea music", None),
        ("green tea", clustered(rng, 1, centres)[0]), ("music", clustered(rng, 1, centres)[0]),
    ]  # fmt: skip
    engines = [Store(tmp_path / "memory.db", readers=1), PostgresStore(shared().fresh_database(), pool_size=2)]
    found: list[list[list[tuple[str, float]]]] = []
    for engine in engines:
        engine.configure_vector_space("clusters:test", DIM)
        with engine:
            for content in contents:
                await engine.memories.add(NewMemory(content, "alice", None, False, "t"))
            while claimed := await engine.jobs.claim_embed(1000):
                await engine.jobs.complete_embed([(job, vectors[job.content]) for job in claimed])
            results = []
            for text, query in queries:
                vector = None if query is None else QueryVector.at_hand(query)
                hits = await engine.memories.search(Scope("alice"), text, limit=10, vector=vector)
                assert hits and all(0.0 < hit.relevance <= 1.0 for hit in hits)
                results.append([(hit.content, hit.relevance) for hit in hits])
                floor = float(np.median([hit.relevance for hit in hits]))
                kept = await engine.memories.search(Scope("alice"), text, limit=10, vector=vector, min_relevance=floor)
                assert [hit.content for hit in kept] == [hit.content for hit in hits if hit.relevance >= floor]
            found.append(results)
    on_sqlite, on_postgres = found
    for (_, query), a, b in zip(queries, on_sqlite, on_postgres, strict=True):
        if query is None:
            assert b == [(content, pytest.approx(r, rel=1e-9)) for content, r in a]
        else:
            assert sorted(c for c, _ in b) == sorted(c for c, _ in a)
            expected = dict(a)
            assert [r for _, r in b] == [pytest.approx(expected[c], rel=0.25) for c, _ in b]


async def test_common_terms_rank_the_recent_window_as_the_sqlite_engine_does(tmp_path: Path) -> None:
    """A word in 1000 memories or more of the scope is common: the rare words rank first and,
    when they find too few, the newest matches of every word follow, by the summed IDF over that
    window.  Both engines give the same hits in the same order with the same relevance."""
    from memoryd.store.sqlite import Store

    fillers = ["sunny", "rainy", "windy", "quiet", "busy", "early", "late"]
    # "note" is in every memory (common); each "wN" in about nine (rare).
    contents = [f"alice note w{i % 150} {fillers[i % 7]} {' '.join(['more'] * (i % 3))}" for i in range(1300)]
    queries = ["note", "note w5", "note w7 w8", "w9 w10", "sunny note w11"]
    engines = [Store(tmp_path / "memory.db", readers=1), PostgresStore(shared().fresh_database(), pool_size=2)]
    found: list[list[list[tuple[str, float]]]] = []
    for engine in engines:
        with engine:
            engine.memories.add_many(NewMemory(content, "alice", None, False, "t") for content in contents)
            found.append(
                [
                    [(hit.content, hit.relevance) for hit in await engine.memories.search(Scope("alice"), q, limit=10)]
                    for q in queries
                ]
            )
    on_sqlite, on_postgres = found
    for a, b in zip(on_sqlite, on_postgres, strict=True):
        assert len(a) == 10
        assert b == [(content, pytest.approx(r, rel=1e-9)) for content, r in a]


def test_the_hnsw_index_is_over_halfvec_and_an_older_float_index_is_replaced(store: PostgresStore) -> None:
    """The index of the current vectors is built over their half-precision copies; a database
    whose index is over the float32 vectors (schema v3) gets a halfvec one when it migrates."""
    import psycopg

    from memoryd.store.postgres import schema

    def definition(conn: psycopg.Connection[object]) -> str:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s AND schemaname = current_schema()",
            (searching.hnsw_index(1),),
        )
        return str((row.fetchone() or ("",))[0])

    assert "halfvec_cosine_ops" in store.db.run_sync(definition)

    def downgrade(conn: psycopg.Connection[object]) -> None:
        conn.execute(f"DROP INDEX {searching.hnsw_index(1)}")
        conn.execute(
            f"CREATE INDEX {searching.hnsw_index(1)} ON memory_vectors "
            f"USING hnsw ((embedding::vector({DIM})) vector_cosine_ops) WHERE generation = 1"
        )
        conn.execute("DELETE FROM memoryd_schema WHERE version > 3")

    store.db.run_sync(downgrade)
    assert "vector_cosine_ops" in store.db.run_sync(definition)
    assert store.db.run_sync(schema.migrate) == len(schema.MIGRATIONS)
    migrated = store.db.run_sync(definition)
    assert f"(embedding)::halfvec({DIM})" in migrated and "halfvec_cosine_ops" in migrated
    assert "WHERE (generation = 1)" in migrated


async def test_words_first_met_in_a_scope_with_more_matches_than_one_read_rank_as_on_sqlite(tmp_path: Path) -> None:
    """A search whose words the daemon has not met yet reads their newest matches assuming
    they are rare; with more matches than that read holds, the same statement counts each word
    on its own.  The hits are the SQLite engine's, whether the words are new or known."""
    from memoryd.store.sqlite import Store

    fillers = ["sunny", "rainy", "windy", "quiet", "busy", "early", "late"]
    count = searching.RECENT_WINDOW + 600
    contents = [f"alice note w{i % 400} {fillers[i % 7]} {' '.join(['more'] * (i % 3))}" for i in range(count)]
    queries = ["note w5", "w9 note w10", "sunny note", "note"]
    sqlite, postgres = Store(tmp_path / "memory.db", readers=1), PostgresStore(shared().fresh_database(), pool_size=2)
    with sqlite, postgres:
        for engine in (sqlite, postgres):
            engine.memories.add_many(NewMemory(content, "alice", None, False, "t") for content in contents)
        for q in queries:
            expected = [(h.content, h.relevance) for h in await sqlite.memories.search(Scope("alice"), q, limit=10)]
            assert len(expected) == 10
            postgres.scope_stats = searching.ScopeStats()  # every word new to the daemon
            new = await postgres.memories.search(Scope("alice"), q, limit=10)
            known = await postgres.memories.search(Scope("alice"), q, limit=10)
            for hits in (new, known):
                assert [(h.content, h.relevance) for h in hits] == [
                    (c, pytest.approx(r, rel=1e-9)) for c, r in expected
                ]
        assert postgres.scope_stats.common("u:alice", ["note"])
        assert not postgres.scope_stats.common("u:alice", ["w5"])


@pytest.mark.parametrize("dim", [384, 3072])
async def test_vectors_are_stored_inline_while_they_fit_a_page_and_bigger_ones_still_work(dim: int) -> None:
    """A 384-d vector is read in place by exact scans (nothing out of line); a 3072-d one
    (OpenAI's text-embedding-3-large) does not fit a page and is stored out of line, and found."""
    with PostgresStore(shared().fresh_database(), pool_size=2) as store:
        store.configure_vector_space("dims:test", dim)
        await store.memories.add(
            NewMemory(content="a wide vector", owner="alice", chat_id=None, shared=False, source="t")
        )
        [job] = await store.jobs.claim_embed(10)
        vector = np.ones(dim, dtype=np.float32) / np.sqrt(dim)
        await store.jobs.complete_embed([(job, vector)])
        [hit] = await store.memories.search(Scope("alice"), "", limit=5, vector=QueryVector.at_hand(vector))
        assert hit.similarity == pytest.approx(1.0, abs=1e-3) and store.condition.state == "ok"
        (out_of_line,) = store.db.run_sync(
            lambda conn: conn.execute(
                "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = 'memory_vectors'::regclass"
            ).fetchone()
        )
        assert (out_of_line > 0) == (dim > 2000)


def test_a_statement_the_server_refuses_is_an_error_of_the_call_not_an_outage() -> None:
    """pgvector indexes at most 4000 dimensions: the refusal names the limit, and the store does
    not report the server as unreachable (health stays ok)."""
    from memoryd.errors import StoreError, StoreUnreachable

    with PostgresStore(shared().fresh_database(), pool_size=2) as store:
        with pytest.raises(StoreError, match="4000 dimensions") as refused:
            store.configure_vector_space("dims:test", 4001)
        assert not isinstance(refused.value, StoreUnreachable)
        assert store.condition.state == "ok"
