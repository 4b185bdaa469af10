"""Admin benchmark: the time and peak RSS of `memoryd stats|export|import|backup|check|gc` on
a store of 100k memories, plus the cost of access recording.

    python bench/bench_admin.py [--memories 100000] [--keep DIR]

Builds a store like a long-running daemon's: N memories over 1000 users with ~20-word texts,
384-d random unit vectors written through the real job path, 30% deleted and 10% expired
40 days ago (so gc has 40% to purge).  Every command runs as its own process, exactly as an
operator would run it; its peak RSS comes from wait4(2).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memoryd.ids import DAY_MS, now_ms
from memoryd.store import NewMemory
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.db.database import open_connection, write_transaction
from memoryd.store.sqlite.memories import memories
from memoryd.store.sqlite.memories.hits import HitCounter, write_hits

DIM = 384


def build(data: Path, count: int, rng: np.random.Generator) -> None:
    words = [f"w{i}" for i in range(20_000)]
    pick = random.Random(1)
    data.mkdir(parents=True)
    created = now_ms() - 60 * DAY_MS
    long_ago = now_ms() - 40 * DAY_MS
    clock = Clock(created)
    with Store(data / "memoryd.db", readers=1, clock=clock) as store:
        store.configure_vector_space("bench:random", DIM)
        batch = 10_000
        for start in range(0, count, batch):
            news = (
                NewMemory(
                    " ".join(pick.choices(words, k=pick.randint(8, 32))),
                    f"user{(start + i) % 1000}",
                    None,
                    False,
                    "bench",
                    subjects=["bench"],
                    metadata={"n": start + i},
                    # 10% expired 40 days ago (embedded while they were alive, below).
                    expires_at_ms=long_ago if (start + i) % 10 == 3 else None,
                )
                for i in range(min(batch, count - start))
            )
            store.memories.add_many(news)
        clock.at = created + DAY_MS
        trio.run(embed_randomly, store, rng)
        store.lifecycle.checkpoint()
    # 30% deleted 40 days ago, the way memory.delete does it (in one transaction, for speed).
    db = open_connection(data / "memoryd.db", busy_timeout_ms=5000)
    try:
        with write_transaction(db):
            for (rowid,) in db.execute("SELECT rowid FROM memories WHERE rowid % 10 IN (1, 2, 5)").fetchall():
                memories.mark_deleted(db, rowid, long_ago)
        db.pragma("wal_checkpoint", "TRUNCATE")
    finally:
        db.close()


class Clock:
    """The store's clock, set to the moment being simulated."""

    def __init__(self, at: int) -> None:
        self.at = at

    def __call__(self) -> int:
        return self.at


async def embed_randomly(store: Store, rng: np.random.Generator) -> None:
    while claimed := await store.jobs.claim_embed(10_000):
        vectors = rng.standard_normal((len(claimed), DIM)).astype(np.float32)
        await store.jobs.complete_embed(list(zip(claimed, vectors, strict=True)))


#: Runs a command and reports its peak RSS.  It is a small process of its own because a
#: child's ru_maxrss starts at the RSS of the process it was forked from (this big one).
_MEASURE = """
import os, subprocess, sys
out = subprocess.DEVNULL if sys.argv[1] == "-" else open(sys.argv[1], "wb")
proc = subprocess.Popen(sys.argv[2:], stdout=out)
_, status, usage = os.wait4(proc.pid, 0)
print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def measure(command: list[str], stdout: Path | None = None) -> tuple[float, float, int, str]:
    """(seconds, peak RSS in MB, exit code, stderr) of ``command``."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(stdout) if stdout else "-", *command], capture_output=True, check=False
    )
    seconds = time.perf_counter() - started
    maxrss_kib, code = (int(part) for part in done.stdout.split())
    return seconds, maxrss_kib / 1024, code, done.stderr.decode()


def run(label: str, args: list[str], data: Path, stdout: Path | None = None) -> None:
    seconds, rss, code, error = measure([sys.executable, "-m", "memoryd", *args, "--data-dir", str(data)], stdout)
    state = "ok" if code == 0 else f"exit {code}"
    print(f"{label:<28} {seconds:7.2f} s   peak RSS {rss:6.1f} MB   {state}")
    if code != 0 and error.strip():
        print("   ", error.strip().splitlines()[-1])


def access_cost(data: Path) -> None:
    log = HitCounter()
    ids = [f"{i:026d}" for i in range(10)]
    rounds = 100_000
    started = time.perf_counter()
    for i in range(rounds):
        log.note(ids, i)
    per_search = (time.perf_counter() - started) / rounds
    print(f"access: noting 10 hits       {per_search * 1e6:7.2f} us per search")
    db = open_connection(data / "memoryd.db", busy_timeout_ms=5000)
    try:
        real_ids = [row[0] for row in db.execute("SELECT id FROM memories LIMIT 10000")]
        fresh = HitCounter()
        fresh.note(real_ids, now_ms())
        started = time.perf_counter()
        with write_transaction(db):
            write_hits(db, fresh.drain())
        print(f"access: flush 10k memories   {(time.perf_counter() - started) * 1000:7.1f} ms (one transaction)")
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="build in this directory and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        data = base / "data"
        started = time.perf_counter()
        build(data, args.memories, np.random.default_rng(1))
        size = (data / "memoryd.db").stat().st_size
        print(
            f"build: {args.memories} memories with {DIM}-d vectors in {time.perf_counter() - started:.1f} s, "
            f"{size / 1e6:.0f} MB"
        )
        _, bare, _, _ = measure([sys.executable, "-c", "import memoryd.admin.stats"])
        print(f"python -m memoryd ... (each its own process; importing the admin code alone is {bare:.0f} MB)")
        run("stats", ["stats"], data)
        dump = base / "export.jsonl"
        run(f"export ({args.memories})", ["export"], data, stdout=dump)
        print(f"{'':<28} {dump.stat().st_size / 1e6:7.1f} MB of JSON Lines")
        run("check", ["check"], data)
        run("backup", ["backup", str(base / "backup.db")], data)
        run("gc --dry-run", ["gc", "--dry-run"], data)
        run(f"gc (purges {args.memories * 4 // 10})", ["gc"], data)
        run("check after gc", ["check"], data)
        run(f"import ({args.memories}, fresh)", ["import", str(dump)], base / "imported")
        run("import again (all present)", ["import", str(dump)], base / "imported")
        access_cost(data)


if __name__ == "__main__":
    main()
