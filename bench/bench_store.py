"""Store benchmark: search latency with 100k memories in one user's scope.

    python bench/bench_store.py [--memories 100000] [--others 10000] [--queries 200]

Builds a fresh database in a temp dir (or --path): N memories for one user with Zipf-distributed
words (so queries hit very common as well as rare terms), a crowd of other users, and a user
"bob" with five memories; random unit vectors (384-d) stand in for embeddings, written through
the real job path (claim + complete).  Prints build time, FTS-only / vector-only / hybrid
search p50 and p99 (no query embedding), list latency, bob's completeness and the DB size.

``--people N`` (default 50) then gives alice N people with ``--links`` memories each and
compares, interleaved in one run, hybrid search as it was before people (no ``about``
annotation), as it is for a query that mentions nobody, and for one that mentions a person.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memoryd.knowledge import MentionFinder
from memoryd.store import NewMemory, PeopleFocus, QueryVector, Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.search import people_retriever
from memoryd.store.sqlite.vectors import bit_index

VOCABULARY = 30_000
ZIPF_EXPONENT = 1.07
DIM = 384


def make_vocabulary(size: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = []
    for i in range(size):
        n, word = i + 26, ""
        while n:
            n, r = divmod(n, 26)
            word = letters[r] + word
        words.append(word)
    return words


class TextMaker:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.words = make_vocabulary(VOCABULARY)
        weights = 1.0 / np.arange(1, VOCABULARY + 1) ** ZIPF_EXPONENT
        self.cdf = np.cumsum(weights / weights.sum())

    def draw(self, count: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, self.rng.random(count)), VOCABULARY - 1)

    def texts(self, count: int, low: int = 8, high: int = 40) -> list[str]:
        lengths = self.rng.integers(low, high, size=count)
        picks = self.draw(int(lengths.sum()))
        out, start = [], 0
        for n in lengths:
            out.append(" ".join(self.words[i] for i in picks[start : start + n]))
            start += n
        return out


def random_units(rng: np.random.Generator, count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def build(
    store: Store, rng: np.random.Generator, maker: TextMaker, n: int, others: int, *, model: str = "bench:random"
) -> None:
    """N memories of "alice", ``others`` spread over 1000 users, bob's five; random unit vectors
    registered as ``model`` (bench/run_all.py names the local model's space, so memoryd with
    ``--embedder local`` serves the file)."""
    batch = 20_000
    for start in range(0, n, batch):
        texts = maker.texts(min(batch, n - start))
        store.memories.add_many(NewMemory(t, "alice", None, False, "bench") for t in texts)
    texts = maker.texts(others)
    store.memories.add_many(NewMemory(t, f"user{i % 1000}", None, False, "bench") for i, t in enumerate(texts))
    bob = [
        "bob drinks oolong tea",
        "bob is allergic to peanuts",
        "bob lives in lisbon",
        "bob's daughter plays the cello",
        "bob prefers aisle seats",
    ]
    store.memories.add_many(NewMemory(t, "bob", None, False, "bench") for t in bob)
    # Vectors through the real job path.
    store.configure_vector_space(model, DIM)
    trio.run(embed_randomly, store, rng)


async def embed_randomly(store: Store, rng: np.random.Generator) -> None:
    while claimed := await store.jobs.claim_embed(10_000):
        units = random_units(rng, len(claimed))
        await store.jobs.complete_embed(list(zip(claimed, units, strict=True)))


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {p50 * 1000:6.2f} ms   p99 {p99 * 1000:6.2f} ms"


async def timed(count: int, call: Callable[[int], Awaitable[object]]) -> list[float]:
    for i in range(min(5, count)):  # warm the page cache
        await call(i)
    bit_index.BIT_INDEX.settle()  # the in-memory scan copies the warm-up made due, read in the background
    samples = []
    for i in range(count):
        start = time.perf_counter()
        await call(i)
        samples.append(time.perf_counter() - start)
    return samples


def query_texts(rng: np.random.Generator, maker: TextMaker, count: int) -> list[str]:
    """1-5 words drawn like the memories' words: common terms as well as rare ones."""
    return [" ".join(maker.words[i] for i in maker.draw(int(rng.integers(1, 6)))) for _ in range(count)]


async def measure(store: Store, rng: np.random.Generator, maker: TextMaker, queries: int) -> dict[str, list[float]]:
    """Print and return the latency samples (seconds) of each kind of call."""
    alice, bob = Scope("alice", None), Scope("bob", "some-chat")
    qtexts = query_texts(rng, maker, queries)
    qvecs = random_units(rng, queries)

    fts = await timed(queries, lambda i: store.memories.search(alice, qtexts[i], limit=10))
    print(f"FTS-only     {percentiles(fts)}")
    vec = await timed(
        queries, lambda i: store.memories.search(alice, "", limit=10, vector=QueryVector.at_hand(qvecs[i]))
    )
    print(f"vector-only  {percentiles(vec)}")
    hyb = await timed(
        queries, lambda i: store.memories.search(alice, qtexts[i], limit=10, vector=QueryVector.at_hand(qvecs[i]))
    )
    print(f"hybrid       {percentiles(hyb)}")
    lst = await timed(queries, lambda i: store.memories.list(alice, limit=20))
    print(f"list page    {percentiles(lst)}")
    # No word in it: the bounded scan of store/symbol_match.py, the whole window read.
    sym = await timed(queries, lambda i: store.memories.search(alice, "\u2042", limit=10))
    print(f"symbols only {percentiles(sym)}")

    bob_hyb = await timed(
        queries,
        lambda i: store.memories.search(bob, qtexts[i] + " tea", limit=10, vector=QueryVector.at_hand(qvecs[i])),
    )
    print(f"bob hybrid   {percentiles(bob_hyb)}")
    keyword = await store.memories.search(bob, "bob", limit=10)
    vector = await store.memories.search(bob, "", limit=10, vector=QueryVector.at_hand(qvecs[0]))
    print(f"bob completeness: keyword {len(keyword)}/5, vector {len(vector)}/5")
    return {"fts": fts, "vector": vec, "hybrid": hyb, "list": lst, "symbols": sym, "bob_hybrid": bob_hyb}


def add_people(store: Store, maker: TextMaker, count: int, links: int) -> list[int]:
    """``count`` people of alice, each named as the subject of ``links`` new memories (bulk:
    one transaction to add, one to learn)."""
    news = [
        NewMemory(t, "alice", None, False, "bench", subjects=[f"Person{i}"])
        for i in range(count)
        for t in maker.texts(links)
    ]
    store.memories.add_many(news)
    added = trio.run(lambda: store.memories.list(Scope("alice"), limit=len(news)))
    store.people.learn_many("alice", [(r.id, r.content, r.subjects) for r in added], ["alice"])
    return [person.rowid for person in trio.run(store.people.people_of, "alice")]


async def compare_people(
    store: Store, rng: np.random.Generator, maker: TextMaker, queries: int, rowids: list[int]
) -> None:
    """Hybrid search before people / mentioning nobody / mentioning one person, interleaved."""
    alice = Scope("alice", None)
    qtexts = query_texts(rng, maker, queries)
    qvecs = random_units(rng, queries)
    annotate = people_retriever.annotate
    samples: dict[str, list[float]] = {"before people": [], "mentions nobody": [], "mentions a person": []}

    def no_annotation(*args: object) -> None:
        return None

    kinds = list(samples)
    for i in range(queries):
        for kind in kinds[i % 3 :] + kinds[: i % 3]:  # rotated: no kind always runs first
            focus = (
                PeopleFocus(mentioned=(rowids[i % len(rowids)],), rest=qtexts[i])
                if kind == "mentions a person"
                else None
            )
            people_retriever.annotate = no_annotation if kind == "before people" else annotate  # type: ignore[assignment]
            start = time.perf_counter()
            await store.memories.search(
                alice, qtexts[i], limit=10, vector=QueryVector.at_hand(qvecs[i]), people_focus=focus
            )
            samples[kind].append(time.perf_counter() - start)
    people_retriever.annotate = annotate  # type: ignore[assignment]
    for kind, values in samples.items():
        print(f"{kind:<18} {percentiles(values)}")
    finder = MentionFinder([p.known() for p in await store.people.people_of("alice")])
    start = time.perf_counter()
    for text in qtexts:
        finder.find(text)
    print(f"mention scan       {(time.perf_counter() - start) / len(qtexts) * 1e6:6.1f} us per query")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--others", type=int, default=10_000, help="memories spread over 1000 other users")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--path", type=Path, help="database file (default: a temp dir)")
    parser.add_argument("--reuse", action="store_true", help="measure an existing --path without rebuilding")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--people", type=int, default=50, help="alice's people (0: skip the people comparison)")
    parser.add_argument("--links", type=int, default=200, help="memories about each person")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    maker = TextMaker(rng)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.path or Path(tmp) / "bench.db"
        store = Store(path)
        try:
            if not (args.reuse and args.path):
                start = time.perf_counter()
                build(store, rng, maker, args.memories, args.others)
                store.lifecycle.checkpoint()
                print(
                    f"build        {time.perf_counter() - start:6.1f} s for "
                    f"{args.memories} + {args.others} + 5 memories"
                )
            store.configure_vector_space("bench:random", DIM)  # query vectors belong to this space
            trio.run(measure, store, rng, maker, args.queries)
            if args.people:
                start = time.perf_counter()
                rowids = add_people(store, maker, args.people, args.links)
                print(f"people       {time.perf_counter() - start:6.1f} s for {args.people} x {args.links} memories")
                trio.run(compare_people, store, rng, maker, args.queries, rowids)
            store.lifecycle.checkpoint()
            print(f"db size      {path.stat().st_size / 1e6:6.1f} MB")
        finally:
            store.close()


if __name__ == "__main__":
    main()
