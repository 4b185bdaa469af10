"""The system.health round trip of two memoryd trees side by side, with the server's CPU per call.

    python bench/bench_rtt.py --base /work/wt/other-checkout [--rounds 5] [--calls 3000]
                              [--placements free,same,cross]

Runs the bare echo (bench/echo_server.py), and memoryd from this tree and from ``--base`` (each
daemon started with its own tree as the working directory, so ``python -m memoryd`` imports that
tree's package), in full-reply (trust) and liveness-only (token, untrusted caller) modes, all at
once; then rounds of the lean load generator (bench/loadgen.py) over every server in turn, 1 and
32 clients, both framings.  Wall-clock p50 is as noisy as the machine; the server's CPU time per
call (all its threads' ``/proc/PID/task/*/schedstat``, nanoseconds) moves much less with the
load, so it is printed next to it, and so are the times per call the server went to sleep
(its voluntary context switches).  Medians over the rounds.

``--placements``: ``free`` leaves the processes where the kernel puts them (as in use); ``same``
pins the server (every thread) and the client to CPU 0, ``cross`` the server to CPU 1 and the
client to CPU 0.  With one client, which of the two the kernel happens to choose moves the round
trip more than anything a server does (bench_rtt --placement shows it): a server that sleeps between
calls pays a wake-up across cores on every call in ``cross``.
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


def cpu_and_sleeps(pid: int) -> tuple[float, int]:
    """CPU seconds (schedstat's first field, in ns) and voluntary context switches (each a sleep
    that a wake-up must end) of every thread of ``pid`` so far, in one pass over its threads."""
    cpu_ns = switches = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as file:
                task_ns = int(file.read().split()[0])
            with open(f"/proc/{pid}/task/{task}/status", encoding="ascii") as file:
                task_switches = sum(int(line.split()[1]) for line in file if line.startswith("voluntary_ctxt_switches"))
        except OSError:
            continue  # a thread that ended meanwhile
        cpu_ns += task_ns
        switches += task_switches
    return cpu_ns / 1e9, switches


#: (server CPUs, client CPUs) per placement; None leaves them where they are.
PLACEMENTS: dict[str, tuple[set[int], set[int]] | None] = {"free": None, "same": ({0}, {0}), "cross": ({1}, {0})}


def pin_server(pid: int, cpus: set[int]) -> None:
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(task), cpus)


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
    parser.add_argument("--placements", default="free", help="free, same, cross (see above)")
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

    placements = args.placements.split(",")
    everywhere = os.sched_getaffinity(0)
    # (label, placement, framing, clients) -> per round (p50, CPU per call, sleeps per call)
    runs: dict[tuple[str, str, str, int], list[tuple[float, float, float]]] = {}
    print(f"load average at the start: {load_average()}")
    for round_ in range(args.rounds):
        # Fresh processes every round: one process's placement on the cores (and its cache luck)
        # biases all of its calls, so the median is over processes as well as rounds.
        with contextlib.ExitStack() as stack:
            servers = {label: stack.enter_context(fresh(label, round_)) for label in labels}
            for placement in placements:
                cpus = PLACEMENTS[placement]
                for server in servers.values():
                    pin_server(server.pid, cpus[0] if cpus else everywhere)
                # The load generator inherits this process's CPUs.
                os.sched_setaffinity(0, cpus[1] if cpus else everywhere)
                try:
                    measure(servers, placement, args, runs)
                finally:
                    os.sched_setaffinity(0, everywhere)
    print(f"load average at the end: {load_average()}; median of {args.rounds} rounds")
    print(f"{'placement':9} {'framing':8} {'clients':>7} {'server':16} {'p50':>9} {'/ echo':>7} "
          f"{'cpu/call':>9} {'/ echo':>7} {'sleeps/call':>11}")  # fmt: skip
    for placement in placements:
        for framing in args.framings.split(","):
            for clients in (1, CLIENTS):
                echo_p50 = statistics.median(r[0] for r in runs["echo", placement, framing, clients])
                echo_cpu = statistics.median(r[1] for r in runs["echo", placement, framing, clients])
                for label in labels:
                    rounds = runs[label, placement, framing, clients]
                    wall = statistics.median(r[0] for r in rounds)
                    cpu = statistics.median(r[1] for r in rounds)
                    slept = statistics.median(r[2] for r in rounds)
                    print(f"{placement:9} {framing:8} {clients:>7} {label:16} {wall * 1e6:>6.1f} us "
                          f"{wall / echo_p50:>6.2f}x {cpu * 1e6:>6.1f} us {cpu / echo_cpu:>6.2f}x {slept:>11.2f}")  # fmt: skip


def measure(
    servers: dict[str, Server],
    placement: str,
    args: argparse.Namespace,
    runs: dict[tuple[str, str, str, int], list[tuple[float, float, float]]],
) -> None:
    """One round of every framing and client count over every server, in turn."""
    for framing in args.framings.split(","):
        for clients, calls, warmup in ((1, args.calls, 200), (CLIENTS, args.per_client, 10)):
            for label, server in servers.items():
                cpu_before, sleeps_before = cpu_and_sleeps(server.pid)
                report = loadgen(server.socket_path, workload="health", clients=clients, requests=calls,
                                 warmup=warmup, framing=framing)  # fmt: skip
                cpu_after, sleeps_after = cpu_and_sleeps(server.pid)
                count = len(report["latencies"]) + clients * warmup
                runs.setdefault((label, placement, framing, clients), []).append(
                    (
                        p50(report["latencies"]),
                        (cpu_after - cpu_before) / count,
                        (sleeps_after - sleeps_before) / count,
                    )
                )


if __name__ == "__main__":
    main()
