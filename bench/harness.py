"""Benchmark plumbing: server subprocesses, the load generator, percentiles, RSS, the machine's load.

Servers (memoryd, the echo server) and the load generator each run in their own process, as a
real daemon and its clients do; everything lives in one temp dir under /tmp whose socket paths
stay far below the 108-byte AF_UNIX limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
LOCAL_MODEL_ID = "local:all-MiniLM-L6-v2"


def clean_env() -> dict[str, str]:
    """The environment without memoryd/ash settings of the shell running the benchmark."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYD_", "ASH_", "MEMORY_"))}


def load_average() -> str:
    with open("/proc/loadavg", encoding="ascii") as file:
        return " ".join(file.read().split()[:3])


def verdict(ok: bool) -> str:
    """A summary row's judgement against its target."""
    return "met" if ok else "MISSED"


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def p99(samples: list[float]) -> float:
    return percentile(samples, 0.99)


def ms(seconds: float) -> str:
    if seconds < 0.001:
        return f"{seconds * 1000:.3f} ms"
    return f"{seconds * 1000:.2f} ms" if seconds < 0.1 else f"{seconds * 1000:.0f} ms"


def process_memory(pid: int) -> dict[str, int]:
    """KiB: VmRSS, VmHWM, RssAnon, RssFile from /proc/PID/status; Pss from smaps_rollup; and
    ``db_maps``, how many mappings of a memoryd.db file the process has.

    VmRSS counts a file page once per mapping: SQLite maps the database once per connection
    (mmap_size), so with N connections the same page-cache page shows up to N times in RssFile.
    Pss counts it once.
    """
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as file:
        for line in file:
            key, _, value = line.partition(":")
            if key in {"VmRSS", "VmHWM", "RssAnon", "RssFile"}:
                out[key] = int(value.split()[0])
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as file:
        for line in file:
            key, _, value = line.partition(":")
            if key == "Pss":
                out["Pss"] = int(value.split()[0])
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as file:
        out["db_maps"] = sum(1 for line in file if line.rstrip().endswith("/memoryd.db"))
    return out


def cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far; with ``reaped``,
    also those of its children it has waited for.  0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def server_cpu_seconds(pgdata: Path) -> float:
    """CPU seconds of the PostgreSQL server of data directory ``pgdata``: the postmaster with
    the backends it has reaped, and every process it still runs (backends, WAL writer, ...)."""
    postmaster = int((pgdata / "postmaster.pid").read_text(encoding="ascii").split()[0])
    total = cpu_seconds(postmaster, reaped=True)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as file:
                parent = int(file.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if parent == postmaster:
            total += cpu_seconds(int(entry))
    return total


@contextlib.contextmanager
def cpu_limited(pids: list[int], cores: float) -> Iterator[bool]:
    """Each process (with its threads) in a CPU cgroup of its own, allowed ``cores`` of CPU
    time, as if it ran on a host of its own that small; yields False, limiting nothing, where
    no cgroup can be made (not root, no cpu controller).  cgroup v1's cpu controller or v2."""
    v1, v2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
    made: list[Path] = []
    try:
        for pid in pids:
            if (v1 / "cpu.cfs_quota_us").exists():
                group = v1 / f"memoryd-bench-{pid}"
                group.mkdir(exist_ok=True)
                made.append(group)
                (group / "cpu.cfs_period_us").write_text("100000")
                (group / "cpu.cfs_quota_us").write_text(str(int(cores * 100_000)))
            elif "cpu" in (v2 / "cgroup.subtree_control").read_text().split():
                group = v2 / f"memoryd-bench-{pid}"
                group.mkdir(exist_ok=True)
                made.append(group)
                (group / "cpu.max").write_text(f"{int(cores * 100_000)} 100000")
            else:
                raise OSError("no cgroup cpu controller")
            (group / "cgroup.procs").write_text(str(pid))
    except OSError:
        yield False
    else:
        yield True
    finally:
        for group in made:
            try:  # the processes leave first (to the root group), then the group goes
                for pid in (group / "cgroup.procs").read_text().split():
                    (group.parent / "cgroup.procs").write_text(pid)
                group.rmdir()
            except OSError:
                pass


def compile_tree(tree: Path) -> None:
    """Bytecode for the tree a daemon runs from, as an installed package has it: under
    PYTHONDONTWRITEBYTECODE=1 (set in some shells) every start would otherwise compile
    memoryd's ~300 modules from source, ~0.3 s of CPU that no deployment pays."""
    folders = [str(tree / name) for name in ("memoryd", "client") if (tree / name).is_dir()]
    if folders:
        subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], check=True, stdout=subprocess.DEVNULL)


def rpc_call(path: str, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
    """One NDJSON call with a blocking socket; returns the decoded reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        message = {"jsonrpc": "2.0", "method": method, "id": 1, "params": params or {}}
        sock.sendall(json.dumps(message).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError(f"{path}: connection closed before the reply to {method}")
            data += chunk
        return json.loads(data)


class Server:
    """A server subprocess serving ``socket_path``; its stderr goes to ``log_path``."""

    def __init__(
        self,
        argv: list[str],
        socket_path: Path,
        log_path: Path,
        *,
        memoryd: bool,
        env: dict[str, str] | None = None,
        cwd: Path = REPO,
    ) -> None:
        """``cwd`` is where ``python -m memoryd`` finds its package: another checkout runs that tree."""
        self.argv = argv
        self.cwd = cwd
        self.env = {**clean_env(), **(env or {})}
        self.socket_path = socket_path
        self.log_path = log_path
        self.memoryd = memoryd
        self.process: subprocess.Popen[bytes] | None = None
        self.ready_seconds = 0.0

    @classmethod
    def memoryd_daemon(
        cls, work: Path, name: str, data_dir: Path, embedder: str, env: dict[str, str] | None = None, cwd: Path = REPO
    ) -> Server:
        argv = [
            sys.executable, "-m", "memoryd", "serve",
            "--socket", str(work / f"{name}.sock"),
            "--data-dir", str(data_dir),
            "--embedder", embedder,
        ]  # fmt: skip
        return cls(argv, work / f"{name}.sock", work / f"{name}.log", memoryd=True, env=env, cwd=cwd)

    @classmethod
    def echo(cls, work: Path, name: str) -> Server:
        argv = [sys.executable, str(BENCH_DIR / "echo_server.py"), str(work / f"{name}.sock")]
        return cls(argv, work / f"{name}.sock", work / f"{name}.log", memoryd=False)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout: float = 60.0) -> float:
        """Start and wait until a call is answered; returns seconds from spawn to that answer."""
        if self.memoryd:
            compile_tree(self.cwd)
        self.socket_path.unlink(missing_ok=True)
        with open(self.log_path, "ab") as log:
            started = time.perf_counter()
            self.process = subprocess.Popen(
                self.argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        deadline = started + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.argv[:4]} exited with {self.process.returncode}:\n{self.log_tail()}")
            if time.perf_counter() > deadline:
                self.stop()
                raise RuntimeError(f"{self.argv[:4]} not ready after {timeout} s:\n{self.log_tail()}")
            if self.socket_path.exists() and self._answers():
                self.ready_seconds = time.perf_counter() - started
                return self.ready_seconds
            time.sleep(0.002)

    def _answers(self) -> bool:
        try:
            if self.memoryd:
                reply = rpc_call(str(self.socket_path), "system.health", timeout=10.0)
                return "result" in reply
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(str(self.socket_path))
            return True
        except OSError:
            return False

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        reply = rpc_call(str(self.socket_path), method, params)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def memory(self) -> dict[str, int]:
        return process_memory(self.pid)

    def stop(self) -> int:
        """SIGTERM (memoryd drains and checkpoints), then wait; returns the exit code."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        code = self.process.returncode
        self.process = None
        return code

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def loadgen(socket_path: Path, *, workload: str, clients: int, requests: int, warmup: int = 10,
            framing: str = "lines", **options: Any) -> dict[str, Any]:  # fmt: skip
    """Run bench/loadgen.py in its own process; returns its JSON report."""
    argv = [
        "--socket", str(socket_path), "--workload", workload, "--framing", framing,
        "--clients", str(clients), "--requests", str(requests), "--warmup", str(warmup),
    ]  # fmt: skip
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return _run_loadgen(argv)


def client_cost(*, requests: int, framing: str = "lines") -> dict[str, Any]:
    """bench/loadgen.py --client-cost: the load generator's own time per call, with no server."""
    return _run_loadgen(["--client-cost", "--requests", str(requests), "--framing", framing])


def _run_loadgen(args: list[str]) -> dict[str, Any]:
    argv = [sys.executable, str(BENCH_DIR / "loadgen.py"), *args]
    done = subprocess.run(argv, cwd=REPO, env=clean_env(), capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"loadgen failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    if report["errors"]:
        print(f"    !! {report['errors']} error replies, e.g. {report['error_samples'][:1]}")
    return report
