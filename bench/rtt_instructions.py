"""User-space instructions per system.health call in the server (callgrind), next to the bare echo.

    python bench/rtt_instructions.py [--base OTHER_CHECKOUT] [--calls 1000] [--framings lines,prefix]

Wall clock on a shared 2-core machine moves 2x between runs of the same code (a process's placement
and its neighbours), and so does CPU time; the count of
instructions the server runs per call does not (within ~1 %).  Each server runs under
``valgrind --tool=callgrind --instr-atstart=no``; after a warm-up, counting is switched on for
``--calls`` sequential calls of one lean client (bench/loadgen.py) and off again.

The daemon re-reads its store numbers once a second (HEALTH_CACHE_SECONDS): under valgrind, 50x
slower, that would land inside the counted calls ~50x as often as in real use, so the daemons
here run with that interval raised (``python -c``, no knob in the daemon itself).
"""

from __future__ import annotations

import argparse
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import REPO, Server, load_average, loadgen  # noqa: E402

_DAEMON = "import memoryd.service.health as h; h.HEALTH_CACHE_SECONDS = 1e9; from memoryd.cli import main; raise SystemExit(main())"


def counted(server: Server, out: Path, framing: str, calls: int) -> float:
    """Instructions per call over ``calls`` calls (callgrind's dump of that stretch alone)."""
    loadgen(server.socket_path, workload="health", clients=1, requests=300, warmup=100, framing=framing)
    pid = str(server.pid)
    subprocess.run(["callgrind_control", "-z", pid], capture_output=True, check=True)
    subprocess.run(["callgrind_control", "-i", "on", pid], capture_output=True, check=True)
    loadgen(server.socket_path, workload="health", clients=1, requests=calls, warmup=0, framing=framing)
    subprocess.run(["callgrind_control", "-i", "off", pid], capture_output=True, check=True)
    subprocess.run(["callgrind_control", "-d", framing, pid], capture_output=True, check=True)
    dumps = sorted(out.parent.glob(out.name + ".*"), key=lambda path: path.stat().st_mtime)
    for line in dumps[-1].read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1]) / calls
    raise RuntimeError(f"no totals in {dumps[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="another checkout, measured the same way")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--framings", default="lines,prefix")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mdinstr-", dir="/tmp"))
    token_env = {"MEMORYD_AUTH_MODE": "token", "MEMORYD_AUTH_TOKEN_SECRET": secrets.token_hex(32)}
    servers: list[tuple[str, Server]] = [("echo", Server.echo(work, "echo"))]
    trees = [("new", REPO)] + ([("base", args.base.resolve())] if args.base else [])
    for tree_name, tree in trees:
        for mode, env in (("health", None), ("liveness", token_env)):
            name = f"{mode}-{tree_name}"
            server = Server.memoryd_daemon(work, name, Path(tempfile.mkdtemp(dir=work)), "none", env=env, cwd=tree)
            server.argv = [sys.executable, "-c", _DAEMON, *server.argv[3:]]  # "python -m memoryd" -> -c
            servers.append((name, server))
    print(f"load average at the start: {load_average()} (instruction counts do not depend on it)")
    results: dict[tuple[str, str], float] = {}
    for name, server in servers:
        out = work / f"callgrind.{name}"
        server.argv = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            *server.argv,
        ]
        server.start(timeout=600)  # a daemon starts in ~1 min under valgrind on a busy machine
        try:
            for framing in args.framings.split(","):
                results[name, framing] = counted(server, out, framing, args.calls)
        finally:
            server.stop()
    print(f"{'server':16} {'framing':8} {'instructions/call':>18} {'/ echo':>7}")
    for (name, framing), per_call in results.items():
        print(f"{name:16} {framing:8} {per_call / 1000:>16.1f}k {per_call / results['echo', framing]:>6.2f}x")


if __name__ == "__main__":
    main()
