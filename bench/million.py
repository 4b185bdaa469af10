"""A million memories over ten thousand users, built the same on SQLite and on PostgreSQL.

The layout is a deployment's, not one user's: ``users`` users with ``personal`` memories each,
and ``chats`` group chats (``users // chats`` members each) with ``group`` shared memories each;
a caller searching from their chat sees their personal scope and that chat's group scope.

Vectors are clustered and embedding-like, so that nearest neighbours mean something (random
unit vectors are all about equally far apart, which makes an approximate index's recall
meaningless): ``TOPICS`` topic sentences, made of words of bench/data/relevance, are embedded by
the local model; every scope draws a few topics, and each memory's vector is its topic's
embedding plus Gaussian noise (cosine ~0.75 to its topic, ~0.55 to its topic's other memories).
Its text carries three of the topic's words among Zipf-distributed filler (bench_store's
vocabulary); a query is a few words of one of the caller's topics, embedded by the daemon, so it
lands near that topic's memories.

SQLite is filled through the store (``add_many``, then the embed jobs' claim and complete);
PostgreSQL with ``COPY`` into the tables the store's inserts fill (the same columns, ids, keyword
terms and content hashes), its HNSW index dropped for the load and built afterwards, as an
operator loading a big database does, and that build is timed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_store
import numpy as np
import numpy.typing as npt
import trio
from harness import LOCAL_MODEL_ID

DIM = bench_store.DIM
TOPICS = 2000
TOPIC_WORDS = 6
TOPICS_PER_SCOPE = 8
#: The noise's length next to the unit topic vector (cosine to the topic 1/sqrt(1 + SPREAD^2)).
SPREAD = 0.9
BATCH = 20_000
F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Layout:
    users: int = 10_000
    chats: int = 1_000
    personal: int = 90
    group: int = 100

    @property
    def total(self) -> int:
        return self.users * self.personal + self.chats * self.group

    @property
    def members(self) -> int:
        return self.users // self.chats

    @classmethod
    def of(cls, total: int) -> Layout:
        """The full layout scaled down to about ``total`` memories (same scope sizes)."""
        full = cls()
        users = max(full.members, round(full.users * total / full.total) // full.members * full.members)
        return cls(users=users, chats=users // full.members)


@dataclass(frozen=True)
class Scope:
    index: int
    owner: str
    chat_id: str | None
    shared: bool
    count: int

    @property
    def key(self) -> str:
        return f"c:{self.chat_id}" if self.shared else f"u:{self.owner}"


class Corpus:
    """The memories of ``layout``, generated scope by scope from ``seed`` (so any scope can be
    regenerated alone, and every builder sees the same rows in the same order)."""

    def __init__(self, layout: Layout, centers: F32, topic_texts: list[list[str]], seed: int = 1) -> None:
        self.layout = layout
        self.centers = centers
        self.topic_texts = topic_texts
        self.seed = seed
        maker = bench_store.TextMaker(np.random.default_rng(seed))
        self.words, self.cdf = maker.words, maker.cdf

    def user(self, i: int) -> str:
        return f"user{i}"

    def chat_of(self, user: int) -> str:
        return f"chat{user // self.layout.members}"

    def scopes(self) -> Iterator[Scope]:
        layout = self.layout
        for i in range(layout.users):
            yield Scope(i, self.user(i), None, False, layout.personal)
        for c in range(layout.chats):
            owner = self.user(c * layout.members)
            yield Scope(layout.users + c, owner, f"chat{c}", True, layout.group)

    def topics_of(self, scope_index: int) -> npt.NDArray[np.int64]:
        rng = np.random.default_rng((self.seed, scope_index, 0))
        return rng.choice(len(self.centers), TOPICS_PER_SCOPE, replace=False)

    def rows(self, scope: Scope) -> tuple[list[str], F32]:
        """The scope's texts and unit vectors."""
        rng = np.random.default_rng((self.seed, scope.index, 1))
        topics = self.topics_of(scope.index)[rng.integers(0, TOPICS_PER_SCOPE, scope.count)]
        noise = rng.standard_normal((scope.count, DIM)).astype(np.float32)
        noise *= SPREAD / np.linalg.norm(noise, axis=1, keepdims=True)
        vectors = self.centers[topics] + noise
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        lengths = rng.integers(5, 26, scope.count)
        filler = np.minimum(np.searchsorted(self.cdf, rng.random(int(lengths.sum()))), len(self.words) - 1)
        texts, start = [], 0
        for topic, n in zip(topics, lengths, strict=True):
            words = [self.words[i] for i in filler[start : start + n]]
            start += n
            for word in rng.choice(self.topic_texts[topic], 3, replace=False):
                words.insert(int(rng.integers(0, len(words) + 1)), str(word))
            texts.append(" ".join(words))
        return texts, vectors.astype(np.float32)

    def batches(self, size: int = BATCH) -> Iterator[list[tuple[Scope, str, F32]]]:
        batch: list[tuple[Scope, str, F32]] = []
        for scope in self.scopes():
            texts, vectors = self.rows(scope)
            batch += [(scope, text, vector) for text, vector in zip(texts, vectors, strict=True)]
            if len(batch) >= size:
                yield batch
                batch = []
        if batch:
            yield batch

    def queries(self, count: int, seed: int) -> list[dict[str, Any]]:
        """``count`` searches by users spread over the whole layout, each from the user's chat,
        for 2 to 4 words of one of the user's (or the chat's) topics."""
        rng = np.random.default_rng((self.seed, seed))
        out = []
        for user in rng.choice(self.layout.users, count, replace=False):
            chat = int(user) // self.layout.members
            scope_index = int(user) if rng.random() < 0.7 else self.layout.users + chat
            topic = int(rng.choice(self.topics_of(scope_index)))
            words = rng.choice(self.topic_texts[topic], int(rng.integers(2, 5)), replace=False)
            out.append({"user_id": self.user(int(user)), "chat_id": f"chat{chat}", "query": " ".join(words)})
        return out


def topic_vocabulary() -> list[str]:
    text = " ".join(p.read_text() for p in sorted((Path(__file__).parent / "data" / "relevance").glob("*.txt")))
    return sorted({w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3})


def corpus(layout: Layout, seed: int = 1) -> Corpus:
    """The topic sentences, embedded by the local model in this process (a few seconds)."""
    from memoryd.embed import LocalEmbedder

    vocabulary = topic_vocabulary()
    rng = np.random.default_rng((seed, 2))
    topic_texts = [[str(w) for w in rng.choice(vocabulary, TOPIC_WORDS, replace=False)] for _ in range(TOPICS)]

    async def embed() -> F32:
        embedder = LocalEmbedder()
        await embedder.start()
        try:
            parts = [await embedder.embed([" ".join(t) for t in topic_texts[i : i + 64]]) for i in range(0, TOPICS, 64)]
        finally:
            await embedder.aclose()
        vectors = np.concatenate(parts).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    return Corpus(layout, trio.run(embed), topic_texts, seed)


Log = Callable[[str], None]


# -- SQLite: through the store ---------------------------------------------------------------


def build_sqlite(path: Path, corpus: Corpus, log: Log) -> float:
    """Seconds to fill ``path`` through the store's bulk add and the embed jobs."""
    from memoryd.store import NewMemory
    from memoryd.store.sqlite import Store

    started = time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    with Store(path) as store:
        store.configure_vector_space(LOCAL_MODEL_ID, DIM)
        done = 0
        for batch in corpus.batches():
            store.memories.add_many(NewMemory(text, s.owner, s.chat_id, s.shared, "bench") for s, text, _ in batch)
            trio.run(_embed_batch, store, {text: vector for _, text, vector in batch})
            done += len(batch)
            log(f"sqlite: {done} memories, {time.perf_counter() - started:.0f} s")
        store.lifecycle.checkpoint()
    return time.perf_counter() - started


async def _embed_batch(store: Any, vectors: dict[str, F32]) -> None:
    while claimed := await store.jobs.claim_embed(10_000):
        await store.jobs.complete_embed([(job, vectors[job.content]) for job in claimed])


# -- PostgreSQL: COPY, then the HNSW index ---------------------------------------------------

MEMORY_COLUMNS = (
    ("scope_key", "text"),
    ("rowid", "int8"),
    ("id", "text"),
    ("content", "text"),
    ("owner", "text"),
    ("chat_id", "text"),
    ("shared", "bool"),
    ("source", "text"),
    ("subjects", "text"),
    ("created_at_ms", "int8"),
    ("updated_at_ms", "int8"),
    ("confidence", "float8"),
    ("metadata", "text"),
    ("content_hash", "bytea"),
    ("disclosure", "int2"),
    ("terms", "text[]"),
    ("term_freqs", "float4[]"),
    ("doc_len", "float4"),
)


@dataclass
class PostgresBuild:
    load_seconds: float = 0.0  # COPY of the rows and vectors, committed
    analyze_seconds: float = 0.0
    index_seconds: float = 0.0  # CREATE INDEX of the HNSW index over every vector
    index_bytes: int = 0
    maintenance_work_mem: str = ""


def build_postgres(url: str, corpus: Corpus, log: Log, *, maintenance_work_mem: str = "4GB") -> PostgresBuild:
    import psycopg
    from pgvector.psycopg import register_vector

    from memoryd.ids import new_id
    from memoryd.store.postgres import PostgresStore
    from memoryd.store.postgres import tokens as pg_tokens
    from memoryd.store.postgres.memories import content_hash
    from memoryd.store.visibility import Disclosure

    result = PostgresBuild(maintenance_work_mem=maintenance_work_mem)
    with PostgresStore(url, pool_size=1) as store:  # the schema, and the vector space with its index
        store.configure_vector_space(LOCAL_MODEL_ID, DIM)
    disclosure = Disclosure.of(None, None, False).code
    now = int(time.time() * 1000)
    with psycopg.connect(url) as conn:
        register_vector(conn)
        (generation,) = conn.execute("SELECT value::int FROM meta WHERE key = 'vector_generation'").fetchone() or (0,)
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memory_vectors' AND indexdef ILIKE '%hnsw%'"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f"DROP INDEX {name}")
        started = time.perf_counter()
        rowid = 0
        names = ", ".join(name for name, _ in MEMORY_COLUMNS)
        for batch in corpus.batches():
            with conn.cursor() as cur:
                with cur.copy(f"COPY memories ({names}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types([kind for _, kind in MEMORY_COLUMNS])
                    for i, (scope, text, _) in enumerate(batch, rowid + 1):
                        terms, freqs, length = pg_tokens.document_terms(text, [])
                        copy.write_row(
                            (scope.key, i, new_id(), text, scope.owner, scope.chat_id, scope.shared, "bench", "[]",
                             now, now, 1.0, "{}", content_hash(text), disclosure, terms, freqs, length)
                        )  # fmt: skip
                with cur.copy(
                    "COPY memory_vectors (scope_key, rowid, generation, embedding) FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["text", "int8", "int4", "vector"])
                    for i, (scope, _, vector) in enumerate(batch, rowid + 1):
                        copy.write_row((scope.key, i, generation, vector))
            rowid += len(batch)
            conn.commit()
            log(f"postgres: {rowid} memories, {time.perf_counter() - started:.0f} s")
        conn.execute("SELECT setval('memories_rowid_seq', %s)", (rowid,))
        conn.commit()
        result.load_seconds = time.perf_counter() - started
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        conn.execute("VACUUM (ANALYZE) memories, memory_vectors")
        result.analyze_seconds = time.perf_counter() - started
        conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        for name, definition in indexes:
            log(f"postgres: building {name}")
            started = time.perf_counter()
            conn.execute(definition)
            result.index_seconds += time.perf_counter() - started
            result.index_bytes += int((conn.execute("SELECT pg_relation_size(%s)", (name,)).fetchone() or (0,))[0])
    return result
