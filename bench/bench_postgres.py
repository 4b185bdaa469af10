"""PostgreSQL next to SQLite, in one run: search through the daemon, add throughput with one and
two daemons on one database, start to ready.

    python bench/bench_postgres.py [--quick]      # or: ./dev bench --only postgres

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

PostgreSQL is the test extra's embedded server (pgvector 0.8), on this machine, sharing its CPUs
with the daemons and the load generator, as SQLite does.
"""

from __future__ import annotations

import contextlib
import json
import resource
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_store  # noqa: E402
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
    from memoryd.store.postgres import PostgresStore

    rng = np.random.default_rng(1)
    with PostgresStore(url, pool_size=2) as store:
        bench_store.build(store, rng, bench_store.TextMaker(rng), memories, 1000, model=LOCAL_MODEL_ID)  # type: ignore[arg-type]
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


def search(
    work: Path, name: str, data: Path, env: dict[str, str] | None, queries: Path, count: int
) -> tuple[float, float]:
    with Server.memoryd_daemon(work, name, data, "local", env=env) as daemon:
        report = loadgen(daemon.socket_path, workload="search", clients=1, requests=count, warmup=10,
                         queries_file=queries, user="alice")  # fmt: skip
    return p50(report["latencies"]), p99(report["latencies"])


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
        queries_path = work / "queries.json"
        queries_path.write_text(json.dumps(queries))
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
            s = search(work, f"s{label}", sqlite_data, None, queries_path, queries_count)
            p = search(work, f"p{label}", work / f"pgdata-{label}", postgres.env(database), queries_path, queries_count)
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


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    print(f"bench_postgres ({'quick' if quick else 'full'}), load average {load_average()} at start")
    run(quick)
    print(f"load average {load_average()} at the end")


if __name__ == "__main__":
    main()
