"""Load generator: N connections on a Unix socket, each sending one request and waiting for its reply.

    python bench/loadgen.py --socket PATH --workload health --clients 32 --requests 200
    python bench/loadgen.py --client-cost [--framing prefix]    # this client's own cost per call

Runs in its own process, as a real client does, and is the same code for memoryd and for the bare
echo server (bench/echo_server.py), so their round trips compare fairly.  It is kept lean so that
it does not flatter a slow server by being slow itself: every request is encoded before the clock
starts, each connection is one blocking socket in its own process (one forked process per
connection, no event loop and no GIL shared between connections), a call is one ``sendall`` and
the ``recv`` calls of one reply frame, and replies are decoded only after the measured phase.

``--client-cost`` measures that same call loop with no server at all: a request goes into one
end of a ``socketpair`` and is read back from the other, so the kernel is the (C-speed) echo.
What it reports per call is the client's own share of every round trip measured with it.

Prints one JSON object on stdout: per-call latencies (seconds), wall time of the measured phase,
the count of error replies, and how many memory.add replies said ``"embedded": true``.

Workloads build the request of call ``i`` on connection ``c``:
  health  system.health (no params)
  add     memory.add with unique memory-like content; user ``bench-<c>``
  search  memory.search for user ``--user`` with the queries of ``--queries-file`` (JSON list)
  observe memory.observe of one exchange (a user message like add's content, an assistant reply)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import random
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_HEADER = struct.Struct(">I")
_RECV_SIZE = 65536
_WORDS = (  # memory-like vocabulary for add contents
    "the user prefers dark mode in every editor meeting with bob on tuesday about the roadmap "
    "sarah likes italian food allergic to peanuts daughter emma loves dinosaurs and lives in berlin "
    "remind me to call the dentist next week project deadline budget review birthday party"
).split()

RequestMaker = Callable[[int, int], dict[str, Any]]


def workload(name: str, *, user: str, queries: list[str], limit: int, seed: int) -> RequestMaker:
    if name == "health":
        return lambda conn, i: {"method": "system.health"}
    if name == "add":
        rng = random.Random(seed)

        def add(conn: int, i: int) -> dict[str, Any]:
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 30)))
            return {
                "method": "memory.add",
                "params": {"user_id": f"bench-{conn}", "content": f"{words} (note {seed}-{conn}-{i})"},
            }

        return add
    if name == "observe":
        rng = random.Random(seed)

        def observe(conn: int, i: int) -> dict[str, Any]:
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 30)))
            messages = [
                {"role": "user", "content": f"{words} (note {seed}-{conn}-{i})", "id": f"u{i}"},
                {"role": "assistant", "content": "Noted.", "id": f"a{i}"},
            ]
            return {"method": "memory.observe", "params": {"user_id": f"bench-{conn}", "messages": messages}}

        return observe
    if name == "search":
        if not queries:
            raise SystemExit("loadgen: the search workload needs --queries-file")

        def search(conn: int, i: int) -> dict[str, Any]:
            query = queries[(conn * 7919 + i) % len(queries)]
            return {"method": "memory.search", "params": {"user_id": user, "query": query, "limit": limit}}

        return search
    raise SystemExit(f"loadgen: unknown workload {name!r}")


def encode(message: dict[str, Any], request_id: int, framing: str) -> bytes:
    payload = json.dumps({"jsonrpc": "2.0", "id": request_id, **message}, separators=(",", ":")).encode()
    if framing == "lines":
        return payload + b"\n"
    return _HEADER.pack(len(payload)) + payload


def call_loop(
    out: socket.socket, back: socket.socket, requests: list[bytes], framing: str
) -> tuple[list[float], list[bytes]]:
    """Sends each request on ``out`` and reads one whole reply frame from ``back`` before the next.

    The reply frames come back raw (a line without its newline, or a prefixed payload): decoding
    them here would be client time counted into every round trip.  Replies are read into one
    reused buffer (``recv`` would allocate its whole size for every call).
    """
    clock, send, receive = time.perf_counter, out.sendall, back.recv_into
    buffer = bytearray(_RECV_SIZE)
    view = memoryview(buffer)
    latencies = [0.0] * len(requests)
    frames: list[bytes] = []
    keep = frames.append
    lines = framing == "lines"
    for i, request in enumerate(requests):
        started = clock()
        send(request)
        size = receive(buffer)
        if not size:
            raise SystemExit("loadgen: connection closed by the server")
        # The check is inline, not a function: a call costs ~0.1 us, a few % of the echo's round trip.
        while not (buffer[size - 1] == 0x0A if lines else size >= 4 + _HEADER.unpack_from(buffer)[0]):
            if size == len(buffer):  # a reply longer than the buffer: grow it
                view.release()
                buffer += bytes(len(buffer))
                view = memoryview(buffer)
            more = receive(view[size:])
            if not more:
                raise SystemExit("loadgen: connection closed by the server")
            size += more
        latencies[i] = clock() - started
        keep(bytes(view[: size - 1]) if lines else bytes(view[4:size]))
    return latencies, frames


@dataclass
class Phase:
    latencies: list[float]
    wall: float
    errors: int
    error_samples: list[str]
    embedded: int


@dataclass
class _Job:
    socket_path: str
    index: int
    warmup: list[bytes]
    measured: list[bytes]
    framing: str


def _connection(job: _Job, ready: Any, go: Any, results: Any) -> None:
    """One connection's life in its own process: warm up, wait for the start, measure, report."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(job.socket_path)
        call_loop(sock, sock, job.warmup, job.framing)
        ready.release()
        go.wait()
        started = time.perf_counter()
        latencies, frames = call_loop(sock, sock, job.measured, job.framing)
        results.put((job.index, started, time.perf_counter(), latencies, frames))


def run(jobs: list[_Job]) -> Phase:
    """Every connection makes its calls one at a time; all start together after their warm-up."""
    context = multiprocessing.get_context("fork")
    ready, go, results = context.Semaphore(0), context.Event(), context.Queue()
    workers = [context.Process(target=_connection, args=(job, ready, go, results), daemon=True) for job in jobs]
    for worker in workers:
        worker.start()
    for _ in workers:
        if not ready.acquire(timeout=120):
            raise SystemExit("loadgen: a connection did not finish its warm-up")
    go.set()
    reports = [results.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
        if worker.exitcode:
            raise SystemExit(f"loadgen: a connection process exited with {worker.exitcode}")
    reports.sort()
    wall = max(r[2] for r in reports) - min(r[1] for r in reports)
    return summarize([lat for r in reports for lat in r[3]], wall, [frame for r in reports for frame in r[4]])


def summarize(latencies: list[float], wall: float, frames: list[bytes]) -> Phase:
    errors, embedded, samples = 0, 0, []
    for frame in frames:
        reply = json.loads(frame)
        if isinstance(reply, dict) and "error" in reply:
            errors += 1
            if len(samples) < 3:
                samples.append(json.dumps(reply["error"])[:300])
        elif isinstance(reply, dict) and isinstance(reply.get("result"), dict):
            embedded += reply["result"].get("embedded") is True
    return Phase(latencies, wall, errors, samples, embedded)


def client_cost(requests: list[bytes], framing: str) -> Phase:
    """The call loop against the kernel alone (see the module docstring)."""
    near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with near, far:
        call_loop(near, far, requests[: len(requests) // 10], framing)  # warm-up
        started = time.perf_counter()
        latencies, _ = call_loop(near, far, requests, framing)
        return Phase(latencies, time.perf_counter() - started, 0, [], 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--socket")
    parser.add_argument("--client-cost", action="store_true", help="measure this client alone (no server)")
    parser.add_argument("--framing", choices=["lines", "prefix"], default="lines")
    parser.add_argument("--workload", choices=["health", "add", "search", "observe"], default="health")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--requests", type=int, default=100, help="measured calls per connection")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured calls per connection first")
    parser.add_argument("--user", default="alice")
    parser.add_argument("--queries-file")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--first-user",
        type=int,
        default=0,
        help="connection c makes the calls of connection first-user + c "
        "(add: writes as user bench-<first-user + c>), so that several load generators use users of their own",
    )
    args = parser.parse_args()
    if not args.client_cost and not args.socket:
        parser.error("--socket is required (or --client-cost)")

    queries: list[str] = []
    if args.queries_file:
        with open(args.queries_file, encoding="utf-8") as file:
            queries = json.load(file)
    make = workload(args.workload, user=args.user, queries=queries, limit=args.limit, seed=args.seed)

    def requests(conn: int, first: int, count: int) -> list[bytes]:
        conn += args.first_user
        return [encode(make(conn, call), call + 1, args.framing) for call in range(first, first + count)]

    if args.client_cost:
        phase = client_cost(requests(0, 0, args.requests), args.framing)
    else:
        jobs = [
            _Job(
                args.socket,
                conn,
                requests(conn, 0, args.warmup),
                requests(conn, args.warmup, args.requests),
                args.framing,
            )
            for conn in range(args.clients)
        ]
        phase = run(jobs)
    json.dump(dataclasses.asdict(phase), sys.stdout)


if __name__ == "__main__":
    main()
