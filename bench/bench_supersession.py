"""What the inline offline rules cost memory.add: adds through the plain store path vs the
supersession path (parse attributes, candidates by attribute key, the rules, marking).

    python bench/bench_supersession.py [--adds 2000] [--prefill 10000]

One store per path in a temp dir, both prefilled with the same --prefill memories of one user
(a third of them attribute statements), then --adds adds timed one by one, interleaved
between the two paths so machine noise hits both alike.  Prints p50/p99 per path and how
many adds superseded something.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memoryd.config import SupersessionConfig
from memoryd.service.supersession import Supersession
from memoryd.store import NewMemory, Scope
from memoryd.store.sqlite import Store

THINGS = ["color", "food", "movie", "band", "city", "book", "drink", "sport", "season", "animal"]
VALUES = ["red", "blue", "sushi", "jazz", "paris", "tea", "tennis", "winter", "otters", "green"]
CITIES = ["Berlin", "Paris", "Lisbon", "Oslo", "Rome", "Austin", "Kyoto", "Lima"]


def text(rng: random.Random, i: int) -> str:
    kind = i % 3
    if kind == 0:
        return f"My favorite {rng.choice(THINGS)} is {rng.choice(VALUES)} {i}"
    if kind == 1:
        return f"I moved to {rng.choice(CITIES)} in year {i}"
    return f"Note {i}: remember to water the plants and call the bank about item {rng.randrange(10**6)}"


def percentile(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(q * len(samples)))] * 1000


async def main(adds: int, prefill: int) -> None:
    rng = random.Random(7)
    scope = Scope("alice")
    with (
        tempfile.TemporaryDirectory() as tmp,
        Store(Path(tmp) / "plain.db") as plain,
        Store(Path(tmp) / "rules.db") as ruled,
    ):
        rules = Supersession(ruled.supersession, SupersessionConfig(), use_llm=False)
        for i in range(prefill):
            content = text(rng, i)
            await plain.memories.add(NewMemory(content, "alice", None, False, "bench"))
            await rules.store(scope, NewMemory(content, "alice", None, False, "bench"))
        timings: dict[str, list[float]] = {"plain": [], "rules": []}
        superseding = 0
        for i in range(prefill, prefill + adds):
            content = text(rng, i)
            started = time.perf_counter()
            await plain.memories.add(NewMemory(content, "alice", None, False, "bench"))
            timings["plain"].append(time.perf_counter() - started)
            started = time.perf_counter()
            stored = await rules.store(scope, NewMemory(content, "alice", None, False, "bench"))
            timings["rules"].append(time.perf_counter() - started)
            superseding += bool(stored.superseded)
    for name, samples in timings.items():
        print(
            f"{name:>6}: p50 {percentile(samples, 0.5):.2f} ms  p99 {percentile(samples, 0.99):.2f} ms  "
            f"mean {statistics.fmean(samples) * 1000:.2f} ms"
        )
    print(f"adds that superseded something: {superseding} of {adds}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adds", type=int, default=2000)
    parser.add_argument("--prefill", type=int, default=10_000)
    args = parser.parse_args()
    trio.run(main, args.adds, args.prefill)
