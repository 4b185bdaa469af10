"""The system.health round trip of two memoryd trees side by side, with the server's CPU per call.

    python bench/bench_rtt.py --base /work/wt/other-checkout [--rounds 5] [--calls 3000]

Runs the bare echo (bench/echo_server.py), and memoryd from this tree and from ``--base`` (each
daemon started with its own tree as the working directory, so ``python -m memoryd`` imports that
tree's package), in full-reply (trust) and liveness-only (token, untrusted caller) modes, all at
once; then rounds of the lean load generator (bench/loadgen.py) over every server in turn, 1 and
32 clients, both framings.  Wall-clock p50 is as noisy as the machine; the server's CPU time per
call (all its threads' ``/proc/PID/task/*/schedstat``, nanoseconds) moves much less with the
load, so it is printed next to it.  Medians over the rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Server, load_average, loadgen, p50  # noqa: E402

CLIENTS = 32


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far (schedstat's first field, in ns)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as file:
                total += int(file.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total / 1e9


def daemon(work: Path, name: str, tree: Path, env: dict[str, str] | None) -> Server:
    data = Path(tempfile.mkdtemp(prefix=f"data-{name}-", dir=work))
    return Server.memoryd_daemon(work, name, data, "none", env=env, cwd=tree)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the other checkout (e.g. a worktree of main)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000, help="sequential calls per round")
    parser.add_argument("--per-client", type=int, default=150, help="calls per connection at 32 clients")
    parser.add_argument("--framings", default="lines,prefix")
    parser.add_argument("--modes", default="health,liveness")
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    token_env = {"MEMORYD_AUTH_MODE": "token", "MEMORYD_AUTH_TOKEN_SECRET": secrets.token_hex(32)}
    work = Path(tempfile.mkdtemp(prefix="mdrtt-", dir="/tmp"))
    labels = ["echo"] + [f"{mode}-{tree}" for tree in ("base", "new") for mode in args.modes.split(",")]
    trees = {"base": args.base.resolve(), "new": here}

    def fresh(label: str, round_: int) -> Server:
        if label == "echo":
            return Server.echo(work, f"e{round_}")
        mode, tree = label.split("-")
        env = token_env if mode == "liveness" else None
        return daemon(work, f"{mode[0]}{tree[0]}{round_}", trees[tree], env)

    runs: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    print(f"load average at the start: {load_average()}")
    for round_ in range(args.rounds):
        # Fresh processes every round: one process's placement on the cores (and its cache luck)
        # biases all of its calls, so the median is over processes as well as rounds.
        with contextlib.ExitStack() as stack:
            servers = {label: stack.enter_context(fresh(label, round_)) for label in labels}
            for framing in args.framings.split(","):
                for clients, calls, warmup in ((1, args.calls, 200), (CLIENTS, args.per_client, 10)):
                    for label, server in servers.items():
                        before = cpu_seconds(server.pid)
                        report = loadgen(server.socket_path, workload="health", clients=clients, requests=calls,
                                         warmup=warmup, framing=framing)  # fmt: skip
                        spent = cpu_seconds(server.pid) - before
                        count = len(report["latencies"]) + clients * warmup
                        runs.setdefault((label, framing, clients), []).append(
                            (p50(report["latencies"]), spent / count)
                        )
    print(f"load average at the end: {load_average()}; median of {args.rounds} rounds")
    print(f"{'framing':8} {'clients':>7} {'server':16} {'p50':>9} {'/ echo':>7} {'cpu/call':>9} {'/ echo':>7}")
    for framing in args.framings.split(","):
        for clients in (1, CLIENTS):
            echo_p50 = statistics.median(r[0] for r in runs["echo", framing, clients])
            echo_cpu = statistics.median(r[1] for r in runs["echo", framing, clients])
            for label in labels:
                rounds = runs[label, framing, clients]
                wall = statistics.median(r[0] for r in rounds)
                cpu = statistics.median(r[1] for r in rounds)
                print(f"{framing:8} {clients:>7} {label:16} {wall * 1e6:>6.1f} us {wall / echo_p50:>6.2f}x "
                      f"{cpu * 1e6:>6.1f} us {cpu / echo_cpu:>6.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
