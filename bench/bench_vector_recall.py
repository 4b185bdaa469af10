"""Vector search quality against exact cosine: recall@10 of the store's vector-only search.

    python bench/bench_vector_recall.py [--memories 100000] [--queries 300] [--path FILE] [--reuse]

Builds a store of N memories in alice's scope whose vectors are known: unit vectors with
structure (a 48-dimensional mixture spread over 384 dimensions plus noise, so neighbours are
neither all alike nor all orthogonal, as with sentence embeddings).  Each query is a stored
vector plus noise.  The store's answer (sign-bit scan, 6-bit rescoring) is compared with the
exact top 10 by float32 cosine over the same vectors: recall@10, how often the first hit is
the exact first, and the search's p50.  The vectors come from ``--seed``, so two versions of
memoryd measured on the same seed answer the same queries over the same vectors.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import trio

from memoryd.store import NewMemory, QueryVector, Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.vectors import bit_index

DIM = 384
RANK = 48


def structured_units(rng: np.random.Generator, count: int, basis: np.ndarray) -> np.ndarray:
    mixed = rng.standard_normal((count, RANK)).astype(np.float32) @ basis
    mixed += 0.6 * rng.standard_normal((count, DIM)).astype(np.float32)
    return mixed / np.linalg.norm(mixed, axis=1, keepdims=True)  # type: ignore[no-any-return]


def vectors_and_queries(seed: int, memories: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((RANK, DIM)).astype(np.float32) / np.sqrt(RANK)
    stored = structured_units(rng, memories, basis)
    picked = rng.integers(0, memories, queries)
    noisy = stored[picked] + 0.9 * structured_units(rng, queries, basis)
    return stored, noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


async def embed(store: Store, stored: np.ndarray) -> None:
    while claimed := await store.jobs.claim_embed(10_000):
        await store.jobs.complete_embed([(job, stored[int(job.content.split()[1])]) for job in claimed])


async def measure(store: Store, stored: np.ndarray, queries: np.ndarray) -> None:
    alice = Scope("alice", None)
    for i in range(5):  # the in-memory copy is read on the second sight of the partition's stamp
        await store.memories.search(alice, "", limit=10, vector=QueryVector.at_hand(queries[i]))
    bit_index.BIT_INDEX.settle()  # read in the background
    recalls, firsts, seconds = [], 0, []
    for query in queries:
        started = time.perf_counter()
        hits = await store.memories.search(alice, "", limit=10, vector=QueryVector.at_hand(query))
        seconds.append(time.perf_counter() - started)
        found = {int(hit.content.split()[1]) for hit in hits}
        exact = np.argsort(-(stored @ query), kind="stable")[:10]
        recalls.append(len(found & {int(i) for i in exact}) / 10)
        firsts += bool(hits) and int(hits[0].content.split()[1]) == int(exact[0])
    print(f"recall@10 vs exact cosine  {statistics.fmean(recalls):.4f}  (min {min(recalls):.1f})")
    print(f"first hit = exact first    {firsts / len(queries):.4f}")
    print(f"vector-only search p50     {statistics.median(seconds) * 1000:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--path", type=Path)
    parser.add_argument("--reuse", action="store_true", help="measure an existing --path without rebuilding")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    stored, queries = vectors_and_queries(args.seed, args.memories, args.queries)
    path = args.path or Path(tempfile.mkdtemp(prefix="memoryd-recall-")) / "recall.db"
    with Store(path) as store:
        if not args.reuse:
            news = (NewMemory(f"memory {i}", "alice", None, False, "bench") for i in range(args.memories))
            store.memories.add_many(news)
            store.configure_vector_space("bench:recall", DIM)
            trio.run(embed, store, stored)
        else:
            store.configure_vector_space("bench:recall", DIM)
        print(f"{args.memories} memories of alice, {args.queries} queries (seed {args.seed})")
        trio.run(measure, store, stored, queries)


if __name__ == "__main__":
    main()
