"""Local embedder benchmark: load time (sha256 pins included), one-text latency, batch-of-32 throughput.

    python bench/bench_embed.py [--rounds 30]

Texts look like memories: 5-40 words.  Numbers depend on the CPU and on what else is running;
OpenBLAS uses every core it sees (set OPENBLAS_NUM_THREADS to compare).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import trio

from memoryd.embed import CoalescingEmbedder, LocalEmbedder

WORDS = (  # noqa: SIM905 - a sentence reads better than a list of 50 words
    "the user prefers dark mode in every editor meeting with bob on tuesday about the roadmap "
    "sarah likes italian food allergic to peanuts daughter emma loves dinosaurs and lives in berlin "
    "remind me to call the dentist next week project deadline budget review birthday party"
).split()


def memory_like_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40))) for _ in range(count)]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


async def main(rounds: int) -> None:
    started = time.perf_counter()
    embedder = LocalEmbedder()
    await embedder.start()
    print(f"load (read + sha256 + parse, in a worker thread): {ms(time.perf_counter() - started)}")

    await embedder.embed(memory_like_texts(32, seed=0))  # warm-up: caches, BLAS threads
    singles = memory_like_texts(rounds, seed=1)
    latencies = []
    for text in singles:
        t0 = time.perf_counter()
        await embedder.embed([text])
        latencies.append(time.perf_counter() - t0)
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    print(f"single text: p50 {ms(statistics.median(latencies))}, p99 {ms(p99)} ({rounds} texts)")

    batches = [memory_like_texts(32, seed=100 + i) for i in range(max(3, rounds // 5))]
    t0 = time.perf_counter()
    for batch in batches:
        await embedder.embed(batch)
    elapsed = time.perf_counter() - t0
    per_batch = elapsed / len(batches)
    print(f"batch of 32: {ms(per_batch)} per batch, {32 / per_batch:.0f} texts/s")

    long_text = "The quick brown fox jumps over the lazy dog. " * 60
    t0 = time.perf_counter()
    await embedder.embed([long_text])
    print(f"one 256-token text (truncated): {ms(time.perf_counter() - t0)}")

    # 32 callers at once, as concurrent memory.add/search requests would be.
    coalescing = CoalescingEmbedder(embedder, max_batch=64)
    texts = memory_like_texts(32, seed=7)
    async with trio.open_nursery() as nursery:
        await nursery.start(coalescing.run)
        t0 = time.perf_counter()
        async with trio.open_nursery() as callers:
            for text in texts:
                callers.start_soon(coalescing.embed, [text])
        elapsed = time.perf_counter() - t0
        nursery.cancel_scope.cancel()
    calls = coalescing.describe()["coalescing"]["backend_calls"]
    print(f"32 concurrent single-text callers, coalesced: {ms(elapsed)} total in {calls} backend call(s)")
    await embedder.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    trio.run(main, parser.parse_args().rounds)
