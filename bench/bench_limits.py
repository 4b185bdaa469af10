"""The daemon's memory under attack: RSS idle, then during each attack.

    python bench/bench_limits.py                    # this checkout
    python bench/bench_limits.py --repo /tmp/main   # another checkout (e.g. `git archive main`)

Attacks, each on a fresh daemon (embedder none) holding 300 memories of ~3 KB, one user:
  batch2000  4 batches of 2,000 memory.search (~30 KB reply each) pipelined on one connection
             that never reads its replies (61 MB per reply before replies were bounded)
  batch1000  the same with 1,000 calls per batch (under max_batch_calls: bounded by max_reply_bytes)
  frames     400 connections, each holding an unterminated frame of ~1 MiB

RSS is VmRSS sampled while the attack holds, and VmHWM (the peak; reset through
/proc/PID/clear_refs before each attack).  Target: under 2x the idle figure.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import clean_env, process_memory, rpc_call  # noqa: E402

USER = {"user_id": "rss"}
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()


def start_daemon(repo: Path, work: Path) -> subprocess.Popen[bytes]:
    sock = work / "d.sock"
    env = {**clean_env(), "PYTHONPATH": f"{repo}:{repo / 'client'}"}
    argv = [
        sys.executable,
        "-m",
        "memoryd",
        "serve",
        "--socket",
        str(sock),
        "--data-dir",
        str(work / "data"),
        "--embedder",
        "none",
    ]
    process = subprocess.Popen(argv, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=open(work / "d.log", "ab"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if "result" in rpc_call(str(sock), "system.health", timeout=5):
                return process
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("daemon did not start")


def fill(sock: str) -> None:
    for index in range(300):
        words = " ".join(WORDS[(index + k) % len(WORDS)] for k in range(400))
        reply = rpc_call(sock, "memory.add", {**USER, "content": f"note {index}: {words}"[:3000]})
        assert "result" in reply, reply
    rpc_call(sock, "memory.search", {**USER, "query": "alpha"})


def rss_mib(pid: int) -> tuple[float, float]:
    memory = process_memory(pid)
    return memory["VmRSS"] / 1024, memory["VmHWM"] / 1024


def reset_peak(pid: int) -> None:
    with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as file:
        file.write("5")


def attack_batches(sock: str, calls: int) -> list[socket.socket]:
    """Four big batches pipelined on one connection that then never reads."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sock)
    conn.settimeout(30)
    batch = [
        {"jsonrpc": "2.0", "method": "memory.search", "params": {**USER, "query": WORDS[i % 5]}, "id": i}
        for i in range(calls)
    ]
    line = json.dumps(batch).encode() + b"\n"
    for _ in range(4):
        try:
            conn.sendall(line)
        except OSError:
            break
    return [conn]


def attack_frames(sock: str, count: int = 400) -> list[socket.socket]:
    """``count`` connections, each sending ~1 MiB of a frame that never ends."""
    held: list[socket.socket] = []
    chunk = b'{"jsonrpc":"2.0","method":"system.health","params":{"pad":"' + b"x" * (1024 * 1024 - 100)
    for _ in range(count):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(sock)
            conn.setblocking(False)
            conn.send(chunk)  # as much as the kernel takes now
        except OSError:
            pass
        held.append(conn)
    # Keep pushing what the kernel buffers did not take at first.
    for _ in range(3):
        for conn in held:
            try:
                conn.send(chunk[-256 * 1024 :])
            except OSError:
                pass
        time.sleep(0.5)
    return held


def run(repo: Path, name: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mdl-", dir="/tmp") as tmp:
        work = Path(tmp)
        sock = str(work / "d.sock")
        process = start_daemon(repo, work)
        try:
            fill(sock)
            time.sleep(1)
            idle, _ = rss_mib(process.pid)
            reset_peak(process.pid)
            held = {"batch2000": lambda: attack_batches(sock, 2000), "batch1000": lambda: attack_batches(sock, 1000),
                    "frames": lambda: attack_frames(sock)}[name]()  # fmt: skip
            # Sample until RSS has settled (the unbounded daemon takes a while to build 61 MB
            # replies): at least 6 s, then until 5 s pass without 1 MB of growth, 120 s at most.
            samples: list[float] = []
            started = time.monotonic()
            while time.monotonic() - started < 120:
                time.sleep(0.5)
                samples.append(rss_mib(process.pid)[0])
                if len(samples) >= 12 and max(samples[-10:]) - min(samples[-10:]) < 1.0:
                    break
            _, peak = rss_mib(process.pid)
            alive = "result" in rpc_call(sock, "system.health", timeout=60)
            for conn in held:
                conn.close()
            return {"attack": name, "idle_mib": idle, "held_mib": max(samples), "peak_mib": peak, "alive": alive}
        finally:
            process.terminate()
            process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--only", default="batch2000,batch1000,frames")
    args = parser.parse_args()
    print(f"memoryd RSS under attack, code from {args.repo}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'attack':10} {'idle':>9} {'held':>9} {'peak':>9} {'peak/idle':>9}  alive")
    for name in args.only.split(","):
        result = run(args.repo.resolve(), name)
        ratio = result["peak_mib"] / result["idle_mib"]
        print(
            f"{name:10} {result['idle_mib']:7.1f}MB {result['held_mib']:7.1f}MB {result['peak_mib']:7.1f}MB "
            f"{ratio:8.2f}x  {result['alive']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
