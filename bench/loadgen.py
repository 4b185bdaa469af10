"""Load generator: N connections on a Unix socket, each sending one request and waiting for its reply.

    python bench/loadgen.py --socket PATH --workload health --clients 32 --requests 200

Runs in its own process, as a real client does, and is the same code for memoryd and for the bare
echo server (bench/echo_server.py), so their round trips compare fairly.  It is a plain
``selectors`` loop over non-blocking sockets: a few microseconds of client overhead per call,
which keeps the comparison as strict as it can be.  Prints one JSON object on stdout: per-call
latencies (seconds), wall time of the measured phase, the count of error replies, and how many
memory.add replies said ``"embedded": true``.

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
import random
import selectors
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_HEADER = struct.Struct(">I")
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


@dataclass
class Conn:
    index: int
    sock: socket.socket
    remaining: int
    sent_calls: int = 0
    buffer: bytearray = field(default_factory=bytearray)
    outgoing: bytes = b""
    sent_at: float = 0.0


def next_frame(buffer: bytearray, framing: str) -> bytes | None:
    if framing == "lines":
        end = buffer.find(b"\n")
        if end < 0:
            return None
        frame = bytes(buffer[:end])
        del buffer[: end + 1]
        return frame
    if len(buffer) < 4:
        return None
    (length,) = _HEADER.unpack_from(buffer)
    if len(buffer) < 4 + length:
        return None
    frame = bytes(buffer[4 : 4 + length])
    del buffer[: 4 + length]
    return frame


@dataclass
class Phase:
    latencies: list[float]
    wall: float
    errors: int
    error_samples: list[str]
    embedded: int


def run_phase(conns: list[Conn], per_conn: int, make: RequestMaker, framing: str, *, first_call: int) -> Phase:
    """Every connection makes ``per_conn`` calls, one at a time."""
    selector = selectors.DefaultSelector()
    latencies: list[float] = []
    errors = 0
    samples: list[str] = []
    embedded = 0  # memory.add replies that say the vector was written before the reply

    def send_next(conn: Conn) -> None:
        call = first_call + conn.sent_calls
        conn.sent_calls += 1
        data = encode(make(conn.index, call), call + 1, framing)
        conn.sent_at = time.perf_counter()
        sent = conn.sock.send(data)
        conn.outgoing = data[sent:]
        if conn.outgoing:
            selector.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    started = time.perf_counter()
    active = 0
    for conn in conns:
        conn.remaining, conn.sent_calls = per_conn, 0
        if per_conn:
            selector.register(conn.sock, selectors.EVENT_READ, conn)
            send_next(conn)
            active += 1
    while active:
        for key, events in selector.select():
            conn = key.data
            if events & selectors.EVENT_WRITE and conn.outgoing:
                sent = conn.sock.send(conn.outgoing)
                conn.outgoing = conn.outgoing[sent:]
                if not conn.outgoing:
                    selector.modify(conn.sock, selectors.EVENT_READ, conn)
            if not events & selectors.EVENT_READ:
                continue
            chunk = conn.sock.recv(1 << 20)
            if not chunk:
                raise SystemExit(f"loadgen: connection {conn.index} closed by the server")
            conn.buffer += chunk
            while (frame := next_frame(conn.buffer, framing)) is not None:
                latencies.append(time.perf_counter() - conn.sent_at)
                reply = json.loads(frame)
                if isinstance(reply, dict) and "error" in reply:
                    errors += 1
                    if len(samples) < 3:
                        samples.append(json.dumps(reply["error"])[:300])
                elif isinstance(reply, dict) and isinstance(reply.get("result"), dict):
                    embedded += reply["result"].get("embedded") is True
                conn.remaining -= 1
                if conn.remaining:
                    send_next(conn)
                else:
                    selector.unregister(conn.sock)
                    active -= 1
    selector.close()
    return Phase(latencies, time.perf_counter() - started, errors, samples, embedded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--framing", choices=["lines", "prefix"], default="lines")
    parser.add_argument("--workload", choices=["health", "add", "search", "observe"], default="health")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--requests", type=int, default=100, help="measured calls per connection")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured calls per connection first")
    parser.add_argument("--user", default="alice")
    parser.add_argument("--queries-file")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    queries: list[str] = []
    if args.queries_file:
        with open(args.queries_file, encoding="utf-8") as file:
            queries = json.load(file)
    make = workload(args.workload, user=args.user, queries=queries, limit=args.limit, seed=args.seed)
    conns = []
    for index in range(args.clients):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(args.socket)
        sock.setblocking(False)
        conns.append(Conn(index, sock, 0))
    run_phase(conns, args.warmup, make, args.framing, first_call=0)
    measured = run_phase(conns, args.requests, make, args.framing, first_call=args.warmup)
    for conn in conns:
        conn.sock.close()
    json.dump(dataclasses.asdict(measured), sys.stdout)


if __name__ == "__main__":
    main()
