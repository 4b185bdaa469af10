"""PostgreSQL next to SQLite, in one run: search through the daemon, add throughput with one and
two daemons on one database, start to ready.

    python bench/bench_postgres.py [--quick]      # or: ./dev bench --only postgres
    python bench/bench_postgres.py --1m [--quick] [--store DIR] [--build sqlite|postgres]

- search: memory.search p50/p99 through the daemon (``--embedder local``: the query embedded,
  then the hybrid search) in alice's scope of 10k and 100k memories (2k and 20k with --quick),
  the same store built on each backend (bench_store.build: random unit vectors registered as
  the local model's space);
- add: memory.add throughput with ``--embedder none`` (the store's own cost), 32 connections:
  SQLite with one daemon, PostgreSQL with one daemon, and with two daemons on one database
  (16 connections each, run at the same time, each daemon's for users of its own; their rates
  summed), with the CPU milliseconds per add of the daemons, the server and the load
  generators; then PostgreSQL with one and two daemons again, each daemon limited to a quarter
  of a core (a cgroup of its own, when the benchmark may make one), as on small hosts of their
  own;
- startup: process start to the first answered call, against the 10k store, embedder none.

``--1m``: a million memories over ten thousand users (bench/million.py: 90 personal memories a
user, 100 group memories in each of 1000 chats of ten; clustered, embedding-like vectors), the
same rows on both engines: the build (PostgreSQL: COPY, then the HNSW index, timed alone), disk
per memory, memory.search p50/p99 through the daemon (``--embedder local``) for users spread
over the whole store, each searching from their chat, start to ready against the built store,
the vector-only search's recall@10 against exact cosine for a sample of those searches on both
engines, and the HNSW index's own recall@10 and latency over all million vectors (what one
scope of a million would search through).  ``--quick``: about 50k memories.  ``--store DIR``
keeps both stores in DIR and reuses them on the next run (``--build sqlite`` or ``--build
postgres`` only builds that one, so two processes can build both at once).  ``--float32`` also
builds an HNSW index of the float32 vectors (memoryd's index indexes them cast to ``halfvec``)
and measures it the same way (then drops it).

PostgreSQL is the test extra's embedded server (pgvector 0.8), on this machine, sharing its CPUs
with the daemons and the load generator, as SQLite does.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_store  # noqa: E402
import million  # noqa: E402
from harness import (  # noqa: E402
    LOCAL_MODEL_ID,
    Server,
    cpu_limited,
    cpu_seconds,
    load_average,
    loadgen,
    ms,
    p50,
    p99,
    server_cpu_seconds,
)
from postgres_harness import Postgres  # noqa: E402

CLIENTS = 32
#: The CPU of each daemon, in cores, for the adds measured as if on small hosts of their own.
SMALL_HOST = 0.25


def build_sqlite(data: Path, memories: int) -> None:
    from memoryd.store.sqlite import Store

    data.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    with Store(data / "memoryd.db") as store:
        bench_store.build(store, rng, bench_store.TextMaker(rng), memories, 1000, model=LOCAL_MODEL_ID)


def build_postgres(url: str, memories: int) -> None:
    """The store ``build_sqlite`` builds; as a bulk load is done, the HNSW index is built once
    after the vectors are in (rather than kept up to date through every vector)."""
    import psycopg

    from memoryd.store.postgres import PostgresStore
    from memoryd.store.postgres import search as searching

    rng = np.random.default_rng(1)
    with PostgresStore(url, pool_size=2) as store:
        configure = store.configure_vector_space

        def configure_without_index(model: str, dim: int) -> None:
            configure(model, dim)
            with psycopg.connect(url, autocommit=True) as conn:
                assert store.space is not None
                conn.execute(f"DROP INDEX {searching.hnsw_index(store.space.generation)}")  # type: ignore[arg-type]

        store.configure_vector_space = configure_without_index  # type: ignore[method-assign]
        bench_store.build(store, rng, bench_store.TextMaker(rng), memories, 1000, model=LOCAL_MODEL_ID)  # type: ignore[arg-type]
        space = store.space
        assert space is not None
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET maintenance_work_mem = '1GB'")
            conn.execute(searching.hnsw_definition(space.generation, space.dim))  # type: ignore[arg-type]
        store.maintenance.maintain(compact=True)


def database_bytes(url: str) -> int:
    """The memoryd tables' size with their indexes and TOAST (the database's catalog left out)."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ).fetchone()
    return int(row[0] or 0) if row else 0


def search_interleaved(
    work: Path, daemons: list[tuple[str, Path, dict[str, str] | None]], queries: list[Any], rounds: int = 5
) -> list[tuple[float, float]]:
    """memory.search p50/p99 through each daemon (``--embedder local``), all of them up at once
    and the queries sent in ``rounds`` slices, the daemons taking turns to go first: a change of
    the machine's load during the run falls on each alike."""
    servers = [Server.memoryd_daemon(work, name, data, "local", env=env) for name, data, env in daemons]
    latencies: list[list[float]] = [[] for _ in servers]
    try:
        for server in servers:
            server.start()
        size = -(-len(queries) // rounds)
        for r in range(rounds):
            part = work / f"queries-{r}.json"
            part.write_text(json.dumps(queries[r * size : (r + 1) * size]))
            count = len(queries[r * size : (r + 1) * size])
            order = list(range(len(servers)))
            for n in order[r % len(order) :] + order[: r % len(order)]:
                report = loadgen(servers[n].socket_path, workload="search", clients=1, requests=count,
                                 warmup=10 if r == 0 else 2, queries_file=part, user="alice")  # fmt: skip
                latencies[n] += report["latencies"]
    finally:
        for server in servers:
            server.stop()
    return [(p50(samples), p99(samples)) for samples in latencies]


@dataclass
class AddRate:
    """Adds per second, summed over the daemons, and CPU milliseconds per add (warm-up calls
    included) of the daemons, the PostgreSQL server and the load generators."""

    rate: float
    daemons_ms: float
    postgres_ms: float
    loadgen_ms: float

    def cpu(self) -> str:
        pg = f" + postgres {self.postgres_ms:.2f}" if self.postgres_ms else ""
        return f"{self.daemons_ms:.2f}{pg} + client {self.loadgen_ms:.2f} ms"


def add_rate(
    work: Path, names: list[str], data_dirs: list[Path], env: dict[str, str] | None, per_client: int,
    pgdata: Path | None = None, cores: float | None = None,
) -> AddRate:  # fmt: skip
    """Adds per second acknowledged by ``len(names)`` daemons loaded at the same time.

    Each daemon serves users of its own (as a platform's hosts serve different users), with
    contents of its own: connection c of daemon d adds as user ``bench-<d * clients + c>``.
    ``cores``: each daemon limited to that much CPU (``harness.cpu_limited``), as on a small
    host of its own (``NotLimited`` where that cannot be done here)."""
    daemons = [
        Server.memoryd_daemon(work, name, data, "none", env=env) for name, data in zip(names, data_dirs, strict=True)
    ]
    reports: list[dict[str, Any]] = []
    clients, warmup = CLIENTS // len(daemons), 2
    limits = contextlib.ExitStack()
    try:
        for daemon in daemons:
            daemon.start()
        if cores is not None and not limits.enter_context(cpu_limited([d.pid for d in daemons], cores)):
            raise NotLimited
        threads = [
            threading.Thread(target=lambda d=daemon, i=index: reports.append(
                loadgen(d.socket_path, workload="add", clients=clients, requests=per_client, warmup=warmup,
                        seed=i + 1, first_user=i * clients)))
            for index, daemon in enumerate(daemons)
        ]  # fmt: skip
        # The load generators are this process's children: reaped, their CPU shows in RUSAGE_CHILDREN.
        before = (
            sum(cpu_seconds(d.pid) for d in daemons),
            server_cpu_seconds(pgdata) if pgdata else 0.0,
            _children_cpu(),
        )
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        after = (
            sum(cpu_seconds(d.pid) for d in daemons),
            server_cpu_seconds(pgdata) if pgdata else 0.0,
            _children_cpu(),
        )
    finally:
        limits.close()
        for daemon in daemons:
            daemon.stop()
    adds = len(daemons) * clients * (per_client + warmup)
    daemons_ms, postgres_ms, loadgen_ms = (1000 * (b - a) / adds for a, b in zip(before, after, strict=True))
    return AddRate(sum(len(r["latencies"]) / float(r["wall"]) for r in reports), daemons_ms, postgres_ms, loadgen_ms)


class NotLimited(Exception):
    """No process can be given a CPU limit here (``harness.cpu_limited``)."""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def start_to_ready(work: Path, name: str, data: Path, env: dict[str, str] | None, starts: int) -> float:
    seconds = []
    for _ in range(starts):
        daemon = Server.memoryd_daemon(work, name, data, "none", env=env)
        seconds.append(daemon.start())
        daemon.stop()
    return statistics.median(seconds)


def run(quick: bool = False, results: list[tuple[str, str, str, str]] | None = None) -> None:
    sizes = (2_000, 20_000) if quick else (10_000, 100_000)
    queries_count, per_client, starts = (60, 8, 2) if quick else (300, 40, 5)
    work = Path(tempfile.mkdtemp(prefix="mdpg-", dir="/tmp"))
    postgres = Postgres()
    rows: list[tuple[str, str, str]] = []

    def row(metric: str, sqlite: str, pg: str) -> None:
        rows.append((metric, sqlite, pg))
        print(f"  {metric:55} sqlite {sqlite:>22}   postgres {pg:>22}", flush=True)
        if results is not None:
            results.append((f"{metric}: sqlite / postgres", f"{sqlite} / {pg}", "", ""))

    try:
        rng = np.random.default_rng(7)
        queries = bench_store.query_texts(rng, bench_store.TextMaker(rng), queries_count)
        print(f"memory.search through the daemon, --embedder local, {queries_count} queries, limit 10, alice's scope")
        for memories in sizes:
            label = f"{memories // 1000}k"
            sqlite_data = work / f"sqlite-{label}"
            started = time.perf_counter()
            build_sqlite(sqlite_data, memories)
            sqlite_build = time.perf_counter() - started
            database = f"search{label}"
            started = time.perf_counter()
            build_postgres(postgres.url(database), memories)
            pg_build = time.perf_counter() - started
            print(f"  built {label}: sqlite {sqlite_build:.1f} s, postgres {pg_build:.1f} s")
            total = memories + 1000 + 5  # bench_store.build: alice's, 1000 others', bob's five
            sqlite_bytes = sum(f.stat().st_size for f in sqlite_data.iterdir() if f.name.startswith("memoryd.db"))
            row(
                f"disk per memory at {label} (vectors included)",
                f"{sqlite_bytes / total:.0f} B",
                f"{database_bytes(postgres.url(database)) / total:.0f} B",
            )
            # Both daemons up at once, the queries alternating between them in rounds.
            s, p = search_interleaved(
                work,
                [(f"s{label}", sqlite_data, None), (f"p{label}", work / f"pgdata-{label}", postgres.env(database))],
                queries,
            )
            row(f"search p50 / p99 at {label}", f"{ms(s[0])} / {ms(s[1])}", f"{ms(p[0])} / {ms(p[1])}")
            if memories == sizes[0]:
                row(
                    "start to ready (median), embedder none",
                    f"{start_to_ready(work, 'st', sqlite_data, None, starts):.2f} s",
                    f"{start_to_ready(work, 'pt', work / f'pgdata-{label}', postgres.env(database), starts):.2f} s",
                )
        print(f"memory.add, --embedder none, {CLIENTS} connections x {per_client} adds, fresh stores")
        one_sqlite = add_rate(work, ["as"], [work / "add-sqlite"], None, per_client)
        one_pg = add_rate(work, ["ap"], [work / "add-pg1"], postgres.env("adds_one"), per_client, postgres.pgdata)
        two_pg = add_rate(
            work, ["ap1", "ap2"], [work / "add-pg2a", work / "add-pg2b"], postgres.env("adds_two"), per_client,
            postgres.pgdata,
        )  # fmt: skip
        row("memory.add/s, one daemon", f"{one_sqlite.rate:.0f}/s", f"{one_pg.rate:.0f}/s")
        row(
            "memory.add/s, two daemons on one database",
            "(one file: n/a)",
            f"{two_pg.rate:.0f}/s ({two_pg.rate / one_pg.rate:.2f}x one)",
        )
        row("  CPU per add, one daemon (daemon + server + client)", one_sqlite.cpu(), one_pg.cpu())
        row("  CPU per add, two daemons", "", two_pg.cpu())
        # Here the daemons, the server and the load generators share two cores: a second daemon
        # cannot add much throughput.  Each daemon limited to a small share of CPU, as on a
        # host of its own, shows how the adds scale when the daemons' CPU is what bounds them.
        try:
            small = add_rate(work, ["aq"], [work / "add-pgq1"], postgres.env("adds_q1"), per_client, postgres.pgdata,
                             cores=SMALL_HOST)  # fmt: skip
            two_small = add_rate(
                work, ["aq1", "aq2"], [work / "add-pgq2a", work / "add-pgq2b"], postgres.env("adds_q2"), per_client,
                postgres.pgdata, cores=SMALL_HOST,
            )  # fmt: skip
        except NotLimited:
            print(f"  (each daemon limited to {SMALL_HOST} core: not measured, no cgroup can be made here)")
        else:
            row(
                f"memory.add/s, each daemon limited to {SMALL_HOST} core: one / two",
                "",
                f"{small.rate:.0f} / {two_small.rate:.0f}/s ({two_small.rate / small.rate:.2f}x)",
            )
    finally:
        postgres.stop()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


# -- a million memories over ten thousand users ------------------------------------------------


def run_million(
    quick: bool = False,
    store: Path | None = None,
    build_only: str | None = None,
    results: list[tuple[str, str, str, str]] | None = None,
    *,
    float32: bool = False,
) -> None:
    layout = million.Layout.of(50_000) if quick else million.Layout()
    searches, recall_queries, global_queries, starts = (60, 30, 10, 2) if quick else (300, 100, 30, 5)
    folder = store or Path(tempfile.mkdtemp(prefix="mdpg1m-", dir="/tmp"))
    folder.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="mdpg1m-run-", dir="/tmp"))
    sqlite_data = folder / "sqlite"
    database = "million"
    label = f"{layout.total // 1000}k" if layout.total < 1_000_000 else f"{layout.total / 1e6:g}M"
    corpus = million.corpus(layout)

    def log(line: str) -> None:
        print(f"    {time.strftime('%H:%M:%S')} {line}", flush=True)

    rows: list[tuple[str, str, str]] = []

    def row(metric: str, sqlite: str, pg: str) -> None:
        rows.append((metric, sqlite, pg))
        print(f"  {metric:55} sqlite {sqlite:>22}   postgres {pg:>22}", flush=True)
        if results is not None:
            results.append((f"{metric}: sqlite / postgres", f"{sqlite} / {pg}", "", ""))

    postgres: Postgres | None = None
    try:
        builds = {}
        for engine in ("sqlite", "postgres"):
            marker = folder / f"{engine}-{label}.json"
            if marker.exists():
                builds[engine] = json.loads(marker.read_text())
                continue
            if build_only not in (None, engine):
                continue
            print(f"building {layout.total} memories ({layout}) on {engine}", flush=True)
            if engine == "sqlite":
                shutil.rmtree(sqlite_data, ignore_errors=True)
                builds[engine] = {"seconds": million.build_sqlite(sqlite_data / "memoryd.db", corpus, log)}
            else:
                postgres = postgres or Postgres(folder / "postgres" if store else None)
                built = million.build_postgres(postgres.url(database), corpus, log)
                builds[engine] = dataclasses.asdict(built)
            marker.write_text(json.dumps(builds[engine]))
        if build_only is not None:
            return
        import psycopg

        postgres = postgres or Postgres(folder / "postgres" if store else None)
        url = postgres.url(database, fresh=False)
        sb, pb = builds["sqlite"], builds["postgres"]
        print(f"{layout.total} memories: {layout.users} users x {layout.personal} personal, {layout.chats} chats x "
              f"{layout.group} group; load average {load_average()}")  # fmt: skip
        row(
            "build (s)",
            f"{sb['seconds']:.0f} s (add_many + embed jobs)",
            f"{pb['load_seconds']:.0f} s COPY + {pb['analyze_seconds']:.0f} s analyze + {pb['index_seconds']:.0f} s HNSW",
        )
        with psycopg.connect(url) as conn:
            (workers,) = conn.execute("SHOW max_parallel_maintenance_workers").fetchone() or ("?",)
        print(f"    HNSW build: {pb['index_seconds']:.0f} s with maintenance_work_mem {pb['maintenance_work_mem']} "
              f"and max_parallel_maintenance_workers {workers}, index {pb['index_bytes'] / 1e6:.0f} MB")  # fmt: skip
        sqlite_bytes = sum(f.stat().st_size for f in sqlite_data.iterdir() if f.name.startswith("memoryd.db"))
        pg_bytes = database_bytes(url)
        row(
            f"disk per memory at {label} (vectors, indexes)",
            f"{sqlite_bytes / layout.total:.0f} B",
            f"{pg_bytes / layout.total:.0f} B ({pb['index_bytes'] / layout.total:.0f} HNSW)",
        )
        print("    postgres, largest relations: " + ", ".join(
            f"{name} {size / layout.total:.0f} B" for name, size in relation_sizes(url)[:8]))  # fmt: skip
        queries = corpus.queries(searches, seed=11)
        print(f"memory.search through the daemon, --embedder local, {searches} users, each from their chat, limit 10; "
              f"both daemons up, the queries sent in rounds alternating between them")  # fmt: skip
        s, p = search_interleaved(
            work, [("s1m", sqlite_data, None), ("p1m", work / "pgdata-1m", postgres.env(database))], queries
        )
        row(f"search p50 / p99 at {label}", f"{ms(s[0])} / {ms(s[1])}", f"{ms(p[0])} / {ms(p[1])}")
        row(
            "start to ready (median), embedder none",
            f"{start_to_ready(work, 'st', sqlite_data, None, starts):.2f} s",
            f"{start_to_ready(work, 'pt', work / 'pgdata-1m', postgres.env(database), starts):.2f} s",
        )
        sample = queries[:recall_queries]
        vectors = embed_queries([q["query"] for q in sample])
        exact = [exact_top(corpus, q, v) for q, v in zip(sample, vectors, strict=True)]
        searched = store_searches(sqlite_data / "memoryd.db", url, sample, vectors)
        row(
            f"hybrid search in-process, query vector given, {len(sample)} users",
            *(f"{ms(p50(times))} / {ms(p99(times))}" for _, times in searched),
        )
        hits = [found for found, _ in searched]
        recalls = [sum(len(h & t) for h, t in zip(found, exact, strict=True)) / (10 * len(sample)) for found in hits]
        same = sum(len(a & b) for a, b in zip(*hits, strict=True)) / (10 * len(sample))
        row(
            f"vector-only search recall@10 vs exact, {len(sample)} users",
            f"{recalls[0]:.3f}",
            f"{recalls[1]:.3f} (top 10 shared with sqlite's: {same:.3f})",
        )
        global_vectors = embed_queries(corpus.queries(global_queries, seed=12), key="query")
        sweep = hnsw_recall(url, global_vectors)
        for ef_search, (recall, took, exact_took) in sweep.items():
            row(
                f"HNSW over all {label} vectors, ef_search {ef_search}: recall@10, p50",
                "(no ANN index)",
                f"{recall:.3f}, {ms(took)} (exact {ms(exact_took)})",
            )
        if float32:
            seconds, size = float32_index(url)
            try:
                row(f"float32 HNSW over all {label} vectors: build, size", "", f"{seconds:.0f} s, {size / 1e6:.0f} MB")
                for ef_search, (recall, took, _) in hnsw_recall(url, global_vectors, "vector").items():
                    row(f"float32 HNSW, ef_search {ef_search}: recall@10, p50", "", f"{recall:.3f}, {ms(took)}")
            finally:
                drop_float32_index(url)
    finally:
        if postgres is not None:
            postgres.stop()
        shutil.rmtree(work, ignore_errors=True)
        if store is None:
            shutil.rmtree(folder, ignore_errors=True)


def relation_sizes(url: str) -> list[tuple[str, int]]:
    """Every table (with its TOAST) and index of the memoryd schema, largest first."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_table_size(c.oid) FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i') ORDER BY 2 DESC"
        ).fetchall()
    return [(str(name), int(size)) for name, size in rows]


def embed_queries(items: list[Any], key: str | None = None) -> np.ndarray:
    """The local model's unit vectors of ``items`` (texts, or dicts whose ``key`` is the text)."""
    from memoryd.embed import LocalEmbedder

    texts = [item[key] if key else item for item in items]

    async def embed() -> np.ndarray:
        embedder = LocalEmbedder()
        await embedder.start()
        try:
            vectors = np.asarray(await embedder.embed(texts), dtype=np.float32)
        finally:
            await embedder.aclose()
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    return trio.run(embed)


def exact_top(corpus: million.Corpus, query: dict[str, Any], vector: np.ndarray, k: int = 10) -> set[str]:
    """The contents of the ``k`` memories nearest ``vector`` among the caller's personal and
    chat scopes, by exact cosine (the corpus regenerates both scopes)."""
    user = int(query["user_id"].removeprefix("user"))
    chat = int(query["chat_id"].removeprefix("chat"))
    layout = corpus.layout
    texts: list[str] = []
    parts = []
    for scope in (
        million.Scope(user, query["user_id"], None, False, layout.personal),
        million.Scope(layout.users + chat, corpus.user(chat * layout.members), query["chat_id"], True, layout.group),
    ):
        scope_texts, scope_vectors = corpus.rows(scope)
        texts += scope_texts
        parts.append(scope_vectors)
    cosines = np.concatenate(parts) @ vector
    return {texts[i] for i in np.argsort(-cosines)[:k]}


def store_searches(
    sqlite_path: Path, url: str, queries: list[dict[str, Any]], vectors: np.ndarray
) -> list[tuple[list[set[str]], list[float]]]:
    """In each store (SQLite, PostgreSQL), for each query: the contents its vector-only search
    (no query words) finds, and the time of its hybrid search (words and vector, the vector
    given); query by query, the engines taking turns to go first."""
    from memoryd.store import QueryVector
    from memoryd.store import Scope as CallerScope
    from memoryd.store.postgres import PostgresStore
    from memoryd.store.sqlite import Store

    async def measure(stores: list[Any]) -> list[tuple[list[set[str]], list[float]]]:
        found: list[list[set[str]]] = [[] for _ in stores]
        times: list[list[float]] = [[] for _ in stores]
        for i, (query, vector) in enumerate(zip(queries, vectors, strict=True)):
            scope = CallerScope(query["user_id"], query["chat_id"])
            order = [0, 1] if i % 2 == 0 else [1, 0]
            for n in order:
                hits = await stores[n].memories.search(scope, "", limit=10, vector=QueryVector.at_hand(vector))
                found[n].append({hit.content for hit in hits})
            for n in order:
                started = time.perf_counter()
                await stores[n].memories.search(scope, query["query"], limit=10, vector=QueryVector.at_hand(vector))
                times[n].append(time.perf_counter() - started)
        return list(zip(found, times, strict=True))

    with Store(sqlite_path) as store, PostgresStore(url, pool_size=2) as pg_store:
        store.configure_vector_space(LOCAL_MODEL_ID, million.DIM)
        pg_store.configure_vector_space(LOCAL_MODEL_ID, million.DIM)
        return trio.run(measure, [store, pg_store])


#: The HNSW candidate lists tried (pgvector's hnsw.ef_search; memoryd's own is search.EF_SEARCH).
EF_SEARCHES = (40, 100, 200, 400)


def hnsw_recall(url: str, vectors: np.ndarray, kind: str = "halfvec") -> dict[int, tuple[float, float, float]]:
    """The HNSW index over every vector, unfiltered (as one scope holding them all would be
    searched), at each of EF_SEARCHES: recall@10 against an exact scan, the index scan's p50
    and the exact scan's.  ``kind``: the index's type, ``halfvec`` (memoryd's) or ``vector``
    (``float32_index``)."""
    import psycopg
    from pgvector.psycopg import register_vector

    found = dict.fromkeys(EF_SEARCHES, 0)
    approximate: dict[int, list[float]] = {ef: [] for ef in EF_SEARCHES}
    exact: list[float] = []
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        (dim,) = conn.execute("SELECT value::int FROM meta WHERE key = 'vector_dim'").fetchone() or (million.DIM,)
        (generation,) = conn.execute("SELECT value::int FROM meta WHERE key = 'vector_generation'").fetchone() or (1,)
        exact_sql, sql = (
            f"SELECT rowid FROM memory_vectors WHERE generation = {int(generation)} "
            f"ORDER BY embedding::{cast}({int(dim)}) <=> %s::{cast}({int(dim)}) LIMIT 10"
            for cast in ("vector", kind)
        )
        conn.execute("SET enable_indexscan = off")
        truths = []
        for vector in vectors:
            started = time.perf_counter()
            truths.append({row[0] for row in conn.execute(exact_sql, (vector,))})
            exact.append(time.perf_counter() - started)
        conn.execute("SET enable_indexscan = on")
        conn.execute(f"SET hnsw.ef_search = {max(EF_SEARCHES)}")
        for vector in vectors:  # reads the index's pages in, unmeasured
            conn.execute(sql, (vector,)).fetchall()
        for ef in EF_SEARCHES:
            conn.execute(f"SET hnsw.ef_search = {ef}")
            for vector, truth in zip(vectors, truths, strict=True):
                started = time.perf_counter()
                near = {row[0] for row in conn.execute(sql, (vector,))}
                approximate[ef].append(time.perf_counter() - started)
                found[ef] += len(near & truth)
    return {ef: (found[ef] / (10 * len(vectors)), p50(approximate[ef]), p50(exact)) for ef in EF_SEARCHES}


def float32_index(url: str, maintenance_work_mem: str = "4GB") -> tuple[float, int]:
    """Build an HNSW index of the float32 vectors (twice the bytes of memoryd's ``halfvec``
    one) beside memoryd's: (seconds, bytes).  ``drop_float32_index`` removes it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        (dim,) = conn.execute("SELECT value::int FROM meta WHERE key = 'vector_dim'").fetchone() or (million.DIM,)
        (generation,) = conn.execute("SELECT value::int FROM meta WHERE key = 'vector_generation'").fetchone() or (1,)
        conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        conn.execute("DROP INDEX IF EXISTS bench_float32_hnsw")
        started = time.perf_counter()
        conn.execute(
            f"CREATE INDEX bench_float32_hnsw ON memory_vectors USING hnsw ((embedding::vector({int(dim)})) "
            f"vector_cosine_ops) WHERE generation = {int(generation)}"
        )
        seconds = time.perf_counter() - started
        (size,) = conn.execute("SELECT pg_relation_size('bench_float32_hnsw')").fetchone() or (0,)
    return seconds, int(size)


def drop_float32_index(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX IF EXISTS bench_float32_hnsw")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--1m", dest="million", action="store_true", help="a million memories over 10k users")
    parser.add_argument("--store", type=Path, metavar="DIR", help="with --1m: keep (and reuse) both stores in DIR")
    parser.add_argument("--build", choices=["sqlite", "postgres"], help="with --1m: only build this engine's store")
    parser.add_argument("--float32", action="store_true",
                        help="with --1m: also build and measure an HNSW index of the float32 vectors (then drop it)")  # fmt: skip
    args = parser.parse_args()
    kind = ("1M " if args.million else "") + ("quick" if args.quick else "full")
    print(f"bench_postgres ({kind}), load average {load_average()} at start")
    if args.million:
        run_million(args.quick, args.store, args.build, float32=args.float32)
    else:
        run(args.quick)
    print(f"load average {load_average()} at the end")


if __name__ == "__main__":
    main()
