"""memoryd benchmarks: real daemons in subprocesses, a separate load-generator process, numbers on stdout.

    ./dev bench                    # everything, full sizes (about 2-3 minutes on 2 cores)
    ./dev bench --quick            # smaller sizes, for a smoke run (about 30 s)
    ./dev bench --only rtt,search  # some sections: rtt, add, search, rss, startup, isolation, ...
    ./dev bench --1m               # only the million-memory section (builds for ~10 minutes)
    ./dev bench --1m --quick       # the same section on 50k memories, a smoke run
    ./dev bench --1m --only postgres  # a million memories over 10k users, PostgreSQL next to SQLite

Sections:
  rtt      system.health round trip, sequential and 32 concurrent clients, next to a bare trio echo
           server on the same framing (NDJSON and length-prefix); same client code for both, and
           that client's own cost per call measured with no server (bench/loadgen.py --client-cost)
  add      memory.add throughput, 32 concurrent clients, with --embedder none and local
  search   memory.search p50/p99 at 10k and 100k memories in one user's scope, via the daemon with
           the local embedder (query embedded) and with none (keyword-only), plus the store's hybrid
           search in-process with a precomputed query vector (the "excluding query embedding" figure)
  rss      the daemon's memory (VmRSS, RssAnon/RssFile, Pss) with the local model loaded, serving
           100k memories: at ready, after searches, after adds
  startup  process start to first answered call, median of several starts, local and none
  extract  memory.observe vs memory.add throughput; extraction pipeline overhead per fact beyond
           the LLM's own time (fake LLM on loopback answering at once), see bench_extraction.py
  embed    the local model in-process (onnxruntime), interleaved call by call with
           sentence-transformers when /tmp/st-venv exists (see bench_embed.py): load, one query,
           batches, the backfill's rate
  postgres the PostgreSQL backend next to SQLite: search p50 at 10k/100k, memory.add/s with one and
           two daemons on one database, start to ready (bench_postgres.py; needs the test extra)
  relevance  the fact-style set of bench/data/relevance through a daemon with the local model:
           search top-1, the right fact in memory.context, unanswerable questions with a memory
           injected, against their targets; then the LoCoMo dev figures (bench/relevance.py)
  isolation  a bystander's add and search p50, idle vs under one user's people flood, hang-up
           flood and observe flood (bench_isolation.py); target within 3x
  1m       (only with --1m) a million memories in alice's scope: bytes on disk per memory, the
           in-process FTS / vector / hybrid search (wall and CPU time), and the daemon's VmRSS
           with the local model after searches through the socket
  1m-postgres  (with --1m --only postgres) a million memories over ten thousand users on both
           engines: build (the HNSW index's alone), disk per memory, search through the daemon,
           start to ready, recall@10 (bench_postgres.py --1m, whose --store keeps the stores)

Stores are built by bench_store.build: random unit vectors registered as the local model's space,
so memoryd with the local embedder serves them (timing only: the vectors carry no meaning).
Everything runs on this machine at once (daemon, load generator), so the numbers include their
competition for the CPU, and anything else running at the time: the load average is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import secrets
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import trio

# Run as a script: bench/ is on sys.path (its siblings import as top-level modules); so is the repo.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_embed  # noqa: E402
import bench_extraction  # noqa: E402
import bench_isolation  # noqa: E402
import bench_postgres  # noqa: E402
import bench_store  # noqa: E402
import relevance  # noqa: E402
from harness import LOCAL_MODEL_ID, Server, client_cost, load_average, loadgen, ms, p50, p99, verdict  # noqa: E402

from memoryd.store.sqlite import Store  # noqa: E402

SECTIONS = ("rtt", "add", "search", "rss", "startup", "extract", "embed", "relevance", "isolation", "postgres")


@dataclass(frozen=True)
class Sizes:
    rtt_sequential: int
    rtt_per_client: int
    rtt_rounds: int
    adds_per_client: int
    stores: tuple[int, ...]
    others: int
    queries: int
    starts: int


FULL = Sizes(
    rtt_sequential=2000, rtt_per_client=100, rtt_rounds=3, adds_per_client=40,
    stores=(10_000, 100_000), others=1000, queries=300, starts=5,
)  # fmt: skip
QUICK = Sizes(
    rtt_sequential=500, rtt_per_client=25, rtt_rounds=1, adds_per_client=8,
    stores=(2_000, 20_000), others=200, queries=60, starts=2,
)  # fmt: skip
CLIENTS = 32


@dataclass
class Bench:
    work: Path
    sizes: Sizes
    million: Path | None = None  # --1m-store
    results: list[tuple[str, str, str, str]] = field(default_factory=list)
    _stores: dict[int, Path] = field(default_factory=dict)
    _names: int = 0

    def name(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix}{self._names}"

    def fresh_dir(self, prefix: str) -> Path:
        path = self.work / self.name(prefix)
        path.mkdir()
        return path

    def result(self, metric: str, value: str, target: str = "", verdict: str = "") -> None:
        self.results.append((metric, value, target, verdict))

    def store_dir(self, memories: int) -> Path:
        """A data dir whose memoryd.db holds ``memories`` memories of "alice" (built once per run)."""
        if memories not in self._stores:
            data = self.fresh_dir(f"db{memories // 1000}k-")
            rng = np.random.default_rng(memories)
            maker = bench_store.TextMaker(rng)
            started = time.perf_counter()
            with Store(data / "memoryd.db") as store:
                bench_store.build(store, rng, maker, memories, self.sizes.others, model=LOCAL_MODEL_ID)
                store.lifecycle.checkpoint()
            size = (data / "memoryd.db").stat().st_size / 1e6
            print(f"  built a store of {memories} + {self.sizes.others} + 5 memories in "
                  f"{time.perf_counter() - started:.1f} s ({size:.0f} MB)")  # fmt: skip
            self._stores[memories] = data
        return self._stores[memories]


def latency(report: dict[str, Any]) -> tuple[float, float]:
    return p50(report["latencies"]), p99(report["latencies"])


def throughput(report: dict[str, Any]) -> float:
    return len(report["latencies"]) / float(report["wall"])


# -- rtt ---------------------------------------------------------------------------------------


def bench_rtt(bench: Bench) -> None:
    sizes = bench.sizes
    print(f"system.health round trip: {sizes.rtt_sequential} sequential calls on one connection; "
          f"{CLIENTS} connections x {sizes.rtt_per_client} calls at once; embedder none, empty store")  # fmt: skip
    print("  echo      bare trio echo server, same framing (bench/echo_server.py)")
    print("  health    memoryd, auth trust: the full reply (counts + backlog: two SQL reads in worker threads)")
    print("  liveness  memoryd, auth token, caller not trusted: status/version/uptime only, no SQL,")
    print("            i.e. the RPC stack alone (framing, envelope, dispatch, deadline, reply)")
    # An untrusted peer in token mode gets the liveness-only reply; the secret exists only in this run.
    token_env = {"MEMORYD_AUTH_MODE": "token", "MEMORYD_AUTH_TOKEN_SECRET": secrets.token_hex(32)}
    servers = {
        "echo": Server.echo(bench.work, bench.name("e")),
        "health": Server.memoryd_daemon(bench.work, bench.name("d"), bench.fresh_dir("data-rtt-"), "none"),
        "liveness": Server.memoryd_daemon(bench.work, bench.name("d"), bench.fresh_dir("data-rtt-"), "none",
                                          env=token_env),
    }  # fmt: skip
    # (server, framing, clients) -> one (p50, p99, calls/s) per round
    runs: dict[tuple[str, str, int], list[tuple[float, float, float]]] = {}
    with contextlib.ExitStack() as stack:
        for server in servers.values():
            stack.enter_context(server)
        # Interleaved and repeated: a change in the machine's load hits the three alike, and the
        # median round hides a one-off (the echo baseline at 32 clients swings about 2x from run
        # to run with how the scheduler places client and server on the two cores).
        for _ in range(sizes.rtt_rounds):
            for framing in ("lines", "prefix"):
                for clients, calls, warmup in ((1, sizes.rtt_sequential, 100), (CLIENTS, sizes.rtt_per_client, 5)):
                    for label, server in servers.items():
                        report = loadgen(server.socket_path, workload="health", clients=clients, requests=calls,
                                         warmup=warmup, framing=framing)  # fmt: skip
                        runs.setdefault((label, framing, clients), []).append((*latency(report), throughput(report)))
    print(f"  median of {sizes.rtt_rounds} rounds")
    print(f"  {'framing':8} {'clients':>7} {'server':9} {'p50':>9} {'p99':>9} {'calls/s':>8}  {'p50 / echo p50':>14}")
    for framing in ("lines", "prefix"):
        # The client's own share of every round trip above: its call loop with no server at all.
        own = p50(client_cost(requests=sizes.rtt_sequential * 5, framing=framing)["latencies"])
        e1 = statistics.median(r[0] for r in runs["echo", framing, 1])
        print(f"  {framing:8} {'-':>7} {'client':9} {own * 1e6:>6.1f} us {'':>9} {'':>8}  "
              f"{own / e1:>13.0%} of echo")  # fmt: skip
        bench.result(f"load generator's own cost per call, {framing} (no server)",
                     f"{own * 1e6:.1f} us = {own / e1:.0%} of the 1-client echo", "< 10% of echo",
                     verdict(own < 0.1 * e1))  # fmt: skip
        for clients in (1, CLIENTS):
            e50 = statistics.median(r[0] for r in runs["echo", framing, clients])
            for label in servers:
                rounds = runs[label, framing, clients]
                l50, l99, rate = (statistics.median(r[i] for r in rounds) for i in range(3))
                ratio = l50 / e50
                shown = "" if label == "echo" else f"{ratio:.1f}x"
                print(f"  {framing:8} {clients:>7} {label:9} {ms(l50):>9} {ms(l99):>9} {rate:>8.0f}  {shown:>14}")
                if label != "echo":
                    bench.result(f"{label} round trip p50, {framing}, {clients} client(s)",
                                 f"{ms(l50)} vs echo {ms(e50)} = {ratio:.1f}x", "<= 1.5x echo",
                                 verdict(ratio <= 1.5))  # fmt: skip


# -- add ---------------------------------------------------------------------------------------


def bench_add(bench: Bench) -> None:
    per_client = bench.sizes.adds_per_client
    print(f"memory.add: {CLIENTS} connections x {per_client} adds each (8-30 words, distinct users), fresh store")
    for embedder in ("none", "local"):
        with Server.memoryd_daemon(bench.work, bench.name("d"), bench.fresh_dir("data-add-"), embedder) as daemon:
            report = loadgen(daemon.socket_path, workload="add", clients=CLIENTS, requests=per_client, warmup=2)
            if embedder == "local":
                backlog_at_end = daemon.call("system.health")["backlog"].get("embed", 0)
                drain = drain_seconds(daemon)
                lone = loadgen(daemon.socket_path, workload="add", clients=1, requests=20, warmup=2, seed=2)
            health = daemon.call("system.health")
        (a50, a99), rate = latency(report), throughput(report)
        print(f"  --embedder {embedder:5}  {rate:6.0f} adds/s acknowledged   latency p50 {ms(a50)}  p99 {ms(a99)}")
        bench.result(f"memory.add throughput, embedder {embedder}, {CLIENTS} clients",
                     f"{rate:.0f}/s (p50 {ms(a50)}, p99 {ms(a99)})", ">= 300/s" if embedder == "local" else "",
                     verdict(rate >= 300) if embedder == "local" else "")  # fmt: skip
        if embedder == "local":
            # An add embeds its own text only when the embedder is idle; the rest are acknowledged
            # with embedded: false and the backfill batches them.
            total = (per_client + 2) * CLIENTS
            embedded_rate = total / (float(report["wall"]) + drain)
            print(f"    {report['embedded']}/{len(report['latencies'])} replies embedded: true; backlog "
                  f"{backlog_at_end} when the load stopped, drained {drain:.2f} s after it "
                  f"(every vector stored {float(report['wall']) + drain:.2f} s after the first add: "
                  f"{embedded_rate:.0f} texts/s)")  # fmt: skip
            (l50, l99) = latency(lone)
            print(f"    then one client on the idle embedder: {lone['embedded']}/{len(lone['latencies'])} "
                  f"embedded: true, p50 {ms(l50)} p99 {ms(l99)}; "
                  f"adds embedded at once {health['embedder'].get('adds_embedded_at_once')}, "
                  f"left to the backfill {health['embedder'].get('adds_left_to_backfill')}")  # fmt: skip
            bench.result("memory.add, local: every vector stored after the load (lag)",
                         f"{drain:.2f} s after the last reply; {embedded_rate:.0f} texts/s overall")  # fmt: skip
            bench.result("memory.add, local, one client on an idle embedder",
                         f"{lone['embedded']}/{len(lone['latencies'])} embedded: true, p50 {ms(l50)}")  # fmt: skip


def drain_seconds(daemon: Server, timeout: float = 300.0) -> float:
    """Seconds until the daemon's embed backlog is empty (polled every 20 ms)."""
    started = time.perf_counter()
    while daemon.call("system.health")["backlog"].get("embed", 0):
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"embed backlog not drained after {timeout} s")
        time.sleep(0.02)
    return time.perf_counter() - started


# -- search ------------------------------------------------------------------------------------


def query_file(bench: Bench) -> tuple[Path, list[str]]:
    path = bench.work / "queries.json"
    rng = np.random.default_rng(7)
    queries = bench_store.query_texts(rng, bench_store.TextMaker(rng), bench.sizes.queries)
    path.write_text(json.dumps(queries))
    return path, queries


async def embed_alone(queries: list[str]) -> list[float]:
    """The local model's time for one query (in this process, as the daemon does in a thread)."""
    from memoryd.embed import LocalEmbedder

    embedder = LocalEmbedder()
    await embedder.start()
    samples = []
    try:
        await embedder.embed(queries[:5])
        for query in queries:
            started = time.perf_counter()
            await embedder.embed([query])
            samples.append(time.perf_counter() - started)
    finally:
        await embedder.aclose()
    return samples


def bench_search(bench: Bench) -> None:
    queries_path, queries = query_file(bench)
    count = len(queries)
    print(f"memory.search: {count} sequential queries of 1-5 words, limit 10, in alice's scope "
          f"(plus {bench.sizes.others} memories of 1000 other users and bob's 5)")  # fmt: skip
    embed = trio.run(embed_alone, queries)
    print(f"  query embedding alone (local model, in-process): p50 {ms(p50(embed))}  p99 {ms(p99(embed))}")
    for memories in bench.sizes.stores:
        data = bench.store_dir(memories)
        label = f"{memories // 1000}k"
        for embedder in ("local", "none"):
            search_via_daemon(bench, data, label, embedder, queries_path, count)
        search_in_process(bench, data, label, count, judge=memories >= 100_000)


def search_via_daemon(bench: Bench, data: Path, label: str, embedder: str, queries: Path, count: int) -> None:
    with Server.memoryd_daemon(bench.work, bench.name("d"), data, embedder) as daemon:
        report = loadgen(daemon.socket_path, workload="search", clients=1, requests=count, warmup=10,
                         queries_file=queries, user="alice")  # fmt: skip
        health = loadgen(daemon.socket_path, workload="health", clients=1, requests=100)
    s50, s99 = latency(report)
    what = "query embedded + hybrid" if embedder == "local" else "keyword only (no vector)"
    print(f"  {label:>5} daemon --embedder {embedder:5} {what:25} p50 {ms(s50):>9}  p99 {ms(s99):>9}")
    bench.result(f"search via daemon at {label}, {what}", f"p50 {ms(s50)}, p99 {ms(s99)}")
    if embedder == "none":
        h50, h99 = latency(health)
        print(f"  {label:>5} daemon system.health (trust: counts + backlog)  p50 {ms(h50):>9}  p99 {ms(h99):>9}")
        bench.result(f"system.health at {label}, sequential", f"p50 {ms(h50)}, p99 {ms(h99)}")


def search_in_process(bench: Bench, data: Path, label: str, count: int, *, judge: bool) -> None:
    """bench_store.measure on the same file: the search itself, without RPC or query embedding."""
    with Store(data / "memoryd.db") as store:
        store.configure_vector_space(LOCAL_MODEL_ID, bench_store.DIM)
        print(f"  {label:>5} in-process Store.search (bench_store.measure), random query vector, no RPC:")
        rng = np.random.default_rng(11)
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            samples = trio.run(bench_store.measure, store, rng, bench_store.TextMaker(rng), count)
        print(textwrap.indent(captured.getvalue().rstrip(), "        "))
    h50, h99 = p50(samples["hybrid"]), p99(samples["hybrid"])
    target, judged = ("p50 < 30 ms", verdict(h50 < 0.030)) if judge else ("", "")
    bench.result(f"search at {label}, hybrid excluding query embedding (in-process)",
                 f"p50 {ms(h50)}, p99 {ms(h99)}", target, judged)  # fmt: skip


# -- rss ---------------------------------------------------------------------------------------


def mib(memory: dict[str, int]) -> str:
    rss, anon, file, pss = (memory[key] / 1024 for key in ("VmRSS", "RssAnon", "RssFile", "Pss"))
    return f"VmRSS {rss:4.0f} (anon {anon:3.0f}, file {file:3.0f}), Pss {pss:4.0f}, db maps {memory['db_maps']}"


def bench_rss(bench: Bench) -> None:
    memories = max(bench.sizes.stores)
    data = bench.store_dir(memories)
    queries_path, queries = query_file(bench)
    count = len(queries)
    print(f"daemon memory (MiB) serving {memories} memories of one user: at ready; after {count} sequential and "
          f"{count} searches from 4 clients; after 200 adds from 8 clients")  # fmt: skip
    print("  (RssFile counts the mmap'ed database once per SQLite connection that maps it: `db maps`;")
    print("   Pss counts each page once)")
    for embedder in ("local", "none"):
        with Server.memoryd_daemon(bench.work, bench.name("d"), data, embedder) as daemon:
            at_ready = daemon.memory()
            loadgen(daemon.socket_path, workload="search", clients=1, requests=count, warmup=2,
                    queries_file=queries_path, user="alice")  # fmt: skip
            loadgen(daemon.socket_path, workload="search", clients=4, requests=count // 4, warmup=2,
                    queries_file=queries_path, user="alice")  # fmt: skip
            searched = daemon.memory()
            loadgen(daemon.socket_path, workload="add", clients=8, requests=25, warmup=0)
            added = daemon.memory()
            time.sleep(3)  # the backfill finishes; the daemon gives free heap back after 1 s of quiet
            settled = daemon.memory()
        print(f"  --embedder {embedder}")
        print(f"     ready           {mib(at_ready)}")
        print(f"     after searches  {mib(searched)}")
        print(f"     after adds      {mib(added)}; peak VmHWM {added['VmHWM'] / 1024:.0f}")
        print(f"     3 s later       {mib(settled)}")
        if embedder == "local":
            rss = max(searched["VmRSS"], added["VmRSS"])
            bench.result(f"daemon VmRSS at {memories // 1000}k, local model, after searches",
                         f"{searched['VmRSS'] / 1024:.0f} MiB (anon {searched['RssAnon'] / 1024:.0f}, "
                         f"file {searched['RssFile'] / 1024:.0f} over {searched['db_maps']} maps; "
                         f"Pss {searched['Pss'] / 1024:.0f}); at ready {at_ready['VmRSS'] / 1024:.0f}",
                         "<= 300 MB", verdict(rss * 1024 <= 300e6))  # fmt: skip


# -- a million memories ------------------------------------------------------------------------

MILLION = 1_000_000
#: With --quick, the section runs on this many (a smoke run of the code, not of the scale).
QUICK_MILLION = 50_000


def bench_million(bench: Bench) -> None:
    data = bench.million or bench.store_dir(QUICK_MILLION if bench.sizes is QUICK else MILLION)
    path = data / "memoryd.db"
    with Store(path) as store:  # upgrades a store built by an older memoryd, once
        store.lifecycle.checkpoint()
    count = max(bench.sizes.queries // 3, 60)
    (memories,) = sql_one(path, "SELECT count(*) FROM memories")
    (free,) = sql_one(path, "PRAGMA freelist_count")
    (page,) = sql_one(path, "PRAGMA page_size")
    on_disk = sum(p.stat().st_size for p in data.glob("memoryd.db*"))
    # A store upgraded in place keeps the pages its old vectors freed, for the next writes to
    # reuse (VACUUM would return them): judged on the pages in use.
    per_memory, in_use = on_disk / memories, (on_disk - free * page) / memories
    print(f"a million memories: {memories} in the file; on disk {per_memory:.0f} bytes per memory, "
          f"{in_use:.0f} in pages in use ({free * page / 1e6:.0f} MB free pages)")  # fmt: skip
    bench.result("1M: disk per memory (pages in use)", f"{in_use:.0f} B (file {per_memory:.0f} B)", "<= 1 KB",
                 verdict(in_use <= 1024))  # fmt: skip
    with Store(path) as store:
        store.configure_vector_space(LOCAL_MODEL_ID, bench_store.DIM)
        rng = np.random.default_rng(13)
        started_cpu = time.process_time()
        samples = trio.run(bench_store.measure, store, rng, bench_store.TextMaker(rng), count)
        cpu = (time.process_time() - started_cpu) / (5 * count)
    h50, h99 = p50(samples["hybrid"]), p99(samples["hybrid"])
    print(f"  in-process CPU per search, mean over all kinds: {ms(cpu)}")
    bench.result("1M: hybrid search excluding query embedding (in-process)", f"p50 {ms(h50)}, p99 {ms(h99)}",
                 "p50 <= 50 ms", verdict(h50 <= 0.050))  # fmt: skip
    for kind in ("fts", "vector", "bob_hybrid"):
        bench.result(f"1M: {kind} search (in-process)", f"p50 {ms(p50(samples[kind]))}, p99 {ms(p99(samples[kind]))}")
    queries_path, _ = query_file(bench)
    with Server.memoryd_daemon(bench.work, bench.name("d"), data, "local") as daemon:
        report = loadgen(daemon.socket_path, workload="search", clients=1, requests=count, warmup=5,
                         queries_file=queries_path, user="alice")  # fmt: skip
        memory = daemon.memory()
    s50, s99 = latency(report)
    print(f"  daemon --embedder local: search p50 {ms(s50)} p99 {ms(s99)}; after searches {mib(memory)}")
    bench.result("1M: search via daemon, query embedded + hybrid", f"p50 {ms(s50)}, p99 {ms(s99)}")
    bench.result("1M: daemon VmRSS after searches, local model", f"{memory['VmRSS'] / 1024:.0f} MiB "
                 f"(Pss {memory['Pss'] / 1024:.0f})", "<= 600 MB", verdict(memory["VmRSS"] * 1024 <= 600e6))  # fmt: skip


def sql_one(path: Path, query: str) -> tuple[Any, ...]:
    from memoryd.store.sqlite.db.database import open_connection

    db = open_connection(path, busy_timeout_ms=5000, readonly=True)
    try:
        return tuple(db.execute(query).fetchone())
    finally:
        db.close()


# -- startup -----------------------------------------------------------------------------------


def bench_startup(bench: Bench) -> None:
    starts = bench.sizes.starts
    big = max(bench.sizes.stores)
    print(f"start-up: spawn of `python -m memoryd serve` to first answered system.health, {starts} starts each")
    stores = {"empty": bench.fresh_dir("data-start-"), f"{big // 1000}k": bench.store_dir(big)}
    for store_label, data in stores.items():
        for embedder in ("none", "local"):
            seconds = []
            for _ in range(starts):
                daemon = Server.memoryd_daemon(bench.work, bench.name("d"), data, embedder)
                seconds.append(daemon.start())
                daemon.stop()
            median = statistics.median(seconds)
            print(f"  store {store_label:>5}, --embedder {embedder:5}: median {median:.2f} s "
                  f"(min {min(seconds):.2f}, max {max(seconds):.2f})")  # fmt: skip
            limit = 1.0 if data != stores["empty"] else 2.0  # target: <= 1 s with the big store
            bench.result(f"start to ready, {store_label} store, embedder {embedder}", f"{median:.2f} s (median)",
                         f"<= {limit:.0f} s", verdict(median <= limit))  # fmt: skip


RUNNERS = {
    "rtt": bench_rtt,
    "add": bench_add,
    "search": bench_search,
    "rss": bench_rss,
    "startup": bench_startup,
    "extract": bench_extraction.run,
    "embed": bench_embed.run,
    "relevance": relevance.run,
    "isolation": bench_isolation.run,
    "1m": bench_million,
    "1m-postgres": lambda bench: bench_postgres.run_million(bench.sizes is QUICK, results=bench.results),
    "postgres": lambda bench: bench_postgres.run(bench.sizes is QUICK, bench.results),
}


def parse_only(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown section(s) {unknown}; choose from {', '.join(SECTIONS)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--only", type=parse_only, action="extend", metavar="NAME[,NAME]",
                        help=f"run only these sections ({', '.join(SECTIONS)})")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (stores, daemon logs)")
    parser.add_argument("--1m", dest="million", action="store_true",
                        help="only the million-memory section")  # fmt: skip
    parser.add_argument("--1m-store", dest="million_store", type=Path, metavar="DIR",
                        help="with --1m: a data dir whose memoryd.db holds the million (kept from an earlier "
                             "--keep run) instead of building one")  # fmt: skip
    args = parser.parse_args()
    sections = [name for name in SECTIONS if not args.only or name in args.only]
    if args.million:
        sections = ["1m-postgres"] if args.only == ["postgres"] else ["1m"]

    work = Path(tempfile.mkdtemp(prefix="mdb-", dir="/tmp"))
    bench = Bench(work, QUICK if args.quick else FULL, million=args.million_store)
    started = time.perf_counter()
    print(f"memoryd bench ({'quick' if args.quick else 'full'}): {platform.python_implementation()} "
          f"{platform.python_version()}, {os.cpu_count()} CPUs, load average {load_average()} at start; "
          f"work dir {work}")  # fmt: skip
    try:
        for name in sections:
            print(f"\n[{name}]")
            RUNNERS[name](bench)
    finally:
        if args.keep:
            print(f"\nkept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nsummary (load average {load_average()} at the end; whole run {time.perf_counter() - started:.0f} s)")
    print("| metric | value | target | |")
    print("|---|---|---|---|")
    for metric, value, target, judged in bench.results:
        print(f"| {metric} | {value} | {target} | {judged} |")


if __name__ == "__main__":
    main()
