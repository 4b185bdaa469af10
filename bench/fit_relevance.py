"""Fit relevance (memoryd/store/relevance.py) and choose its thresholds, held out.

    python bench/retrieval.py --keep /tmp/locomo-db      # once: the LoCoMo store
    python bench/relevance.py --no-locomo --keep /tmp/facts-db   # once: the fact store
    python bench/fit_relevance.py --db /tmp/locomo-db --facts /tmp/facts-db [--data PATH]

For every question of both sets the store's own candidate generation runs in-process
(``search.candidates``, the daemon's code) and each candidate is labelled 1 when it answers
the question (the fact a question was written for; a LoCoMo evidence turn), else 0; every
candidate of a question nothing stored answers is 0.  Then, six times over, one persona and one
LoCoMo conversation are held out: the three logistic models of relevance.py are fitted on the
rest (see :func:`fit`), ``memory.context``'s
threshold is chosen on the fitted personas (the best share of answerable questions whose fact
is injected minus the share of unanswerable ones with anything injected) and search's gate
and floor on the fitted personas and conversations (:func:`choose_search`), and everything is
scored on the held-out persona and conversation.  Last, the weights fitted on everything, to ship; the thresholds to ship are the
medians of the six folds' choices (the context threshold rounded to 0.05).

The stores hold the local model's vectors, so the search gives each candidate its adapted cosine
(store/query_adapter.py, the shipped adapter, fitted by bench/fit_adapter.py on
bench/data/relevance_train/ only, never on these sets): the models fitted are relevance.SHIPPED's,
with the best adapted cosine in the query model and each candidate's in the memory model; then,
on everything, relevance.FALLBACK's without them (for other embedders' vectors).
``--no-adapter`` fits and scores FALLBACK's models in the folds instead.  Nothing here reads a name, word or question of either set.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fact_set  # noqa: E402
import locomo  # noqa: E402
from retrieval import default_data  # noqa: E402

from memoryd.embed.local import BUNDLED_SHA256, bundled_model_path  # noqa: E402
from memoryd.embed.query_form import embedded_form  # noqa: E402
from memoryd.embed.sentence_model import SentenceModel  # noqa: E402
from memoryd.ids import now_ms  # noqa: E402
from memoryd.store import answer_kind, ranking, relevance  # noqa: E402
from memoryd.store.sqlite.db.connection import open_connection  # noqa: E402
from memoryd.store.sqlite.search import search, search_parts  # noqa: E402
from memoryd.store.sqlite.vectors import vectors  # noqa: E402
from memoryd.store.visibility import Scope  # noqa: E402

L2 = 0.01
#: A LoCoMo candidate's weight in the fits against a fact's (1): there are far more of them, and a
#: dialogue turn is not what ``memory.context`` mostly serves.
LOCOMO_WEIGHT = 0.05
#: A LoCoMo question's weight in the query model against a fact-set question's (1).
QUESTION_WEIGHT = 0.2
#: How much search's gate and floor together may cost a conversation set (each of the three
#: figures), chosen well inside the 0.01 they may cost held out.
FLOOR_SLACK = 0.002
CONTEXT_GRID = [round(0.05 * i, 2) for i in range(1, 16)]
FLOOR_GRID = [0.0, 0.0005, 0.001, 0.002, 0.003, 0.004, 0.005]
GATE_GRID = [0.0, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05]
CONTEXT_LIMIT = 5  # memory.context's default limit
SEARCH_LIMIT = 10


@dataclass
class Candidates:
    group: str  # persona or conversation
    answerable: bool
    unrelated: bool  # a message not about the user at all (fact set only)
    rowids: list[int]
    matrix: np.ndarray
    has_vector: np.ndarray
    label: np.ndarray
    order: list[int]  # indices of rowids in the ranking model's order, before diversify
    created: dict[int, int]
    question: locomo.Question | None = None
    text: str = ""  # what was asked
    contents: list[str] = field(default_factory=list)  # each candidate's text, as rowids
    # Each candidate's adapted cosine (store/query_adapter.py, as the search read it; 0 without a
    # vector), or None when the store's vectors have no adapter.
    adapted: np.ndarray | None = None


def _embed(model: SentenceModel, texts: list[str]) -> np.ndarray:
    """The queries' vectors, of what the daemon embeds of them (query_form.embedded_form)."""
    matrix = model.embed([embedded_form(text) for text in texts])
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _candidates(
    db: apsw.Connection, scope: Scope, text: str, unit: np.ndarray, space: vectors.VectorSpace | None, limit: int
) -> search.Candidates:
    return search.candidates(db, scope, search_parts.SearchQuery(text, limit, unit, space, now_ms()))


def _ranked(found: search.Candidates, text: str) -> list[int]:
    """The candidates' indices in the search's order (ranking.search_order), before diversify."""
    scored = dict(zip(found.rowids, ranking.scores(found.features).tolist(), strict=True))
    index = {rowid: i for i, rowid in enumerate(found.rowids)}
    ranked = ranking.search_order(scored, found.cosines, found.terms, found.features, text, found.texts)
    return [index[r] for r, _ in ranked]


def _make(
    group: str,
    text: str,
    found: search.Candidates,
    answers: set[int],
    answerable: bool,
    question: locomo.Question | None = None,
    unrelated: bool = False,
) -> Candidates:
    has_vector = np.array([rowid in found.cosines for rowid in found.rowids], dtype=bool)
    label = np.array([1.0 if rowid in answers else 0.0 for rowid in found.rowids])
    adapted = None
    if found.adapted is not None:
        adapted = np.array([found.adapted.get(r, found.cosines.get(r, 0.0)) for r in found.rowids])
    return Candidates(group, answerable, unrelated, found.rowids, found.features, has_vector, label, _ranked(found, text),
                      found.created_at_ms, question, adapted=adapted)  # fmt: skip


def collect_facts(folder: Path, model: SentenceModel) -> list[Candidates]:
    ids: dict[str, dict[str, str]] = json.loads((folder / "facts.json").read_text())
    db = open_connection(folder / "memoryd.db", busy_timeout_ms=5000, readonly=True)
    try:
        space = vectors.read_space(db)
        rowid_of = dict(db.execute("SELECT id, rowid FROM memories"))
        content_of = dict(db.execute("SELECT rowid, content FROM memories"))
        out = []
        # The paraphrase set only when the store holds it (bench/relevance.py adds it).
        check = [fact_set.paraphrase()] if fact_set.PARAPHRASE_NAME in ids else []
        for persona in [*fact_set.load(), *check]:
            asked = [(key, text, False) for key, text in persona.questions]
            asked += [(None, text, False) for text in persona.unanswerable]
            asked += [(None, text, True) for text in persona.unrelated]
            for (key, text, unrelated), unit in zip(asked, _embed(model, [t for _, t, _ in asked]), strict=True):
                found = _candidates(db, Scope(persona.name), text, unit, space, SEARCH_LIMIT)
                answers = {rowid_of[ids[persona.name][key]]} if key else set()
                out.append(_make(persona.name, text, found, answers, key is not None, unrelated=unrelated))
                out[-1].text, out[-1].contents = text, [content_of[r] for r in found.rowids]
        return out
    finally:
        db.close()


def collect_locomo(folder: Path, conversations: list[locomo.Conversation], model: SentenceModel) -> list[Candidates]:
    labels: dict[str, list[str]] = json.loads((folder / "labels.json").read_text())
    db = open_connection(folder / "memoryd.db", busy_timeout_ms=5000, readonly=True)
    try:
        space = vectors.read_space(db)
        ids = dict(db.execute("SELECT rowid, id FROM memories"))
        content_of = dict(db.execute("SELECT rowid, content FROM memories"))
        out = []
        for conversation in conversations:
            units = _embed(model, [q.text for q in conversation.questions])
            for question, unit in zip(conversation.questions, units, strict=True):
                found = _candidates(db, Scope(conversation.user_id), question.text, unit, space, locomo.LIMIT)
                answers = {r for r in found.rowids if set(labels.get(ids[r], [])) & question.evidence}
                out.append(_make(conversation.user_id, question.text, found, answers, True, question))
                out[-1].text, out[-1].contents = question.text, [content_of[r] for r in found.rowids]
        return out
    finally:
        db.close()


def _fit(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> np.ndarray:
    x = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(x.shape[1])
    for _ in range(60):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (weight * (p - y)) + L2 * w
        hessian = (x * (weight * p * (1 - p))[:, None]).T @ x + L2 * np.eye(len(w))
        w -= np.linalg.solve(hessian, gradient)
    return w


def _words_matrix(c: Candidates) -> np.ndarray:
    """The ranker's features as a keyword-only search has them: no cosine, plain coverage."""
    matrix = c.matrix.copy()
    matrix[:, 0] = 0.0
    matrix[c.has_vector, 1] = 1.0 - np.sqrt(np.clip(1.0 - matrix[c.has_vector, 1], 0.0, 1.0))
    return matrix


def fit(sets: list[Candidates], adapter: bool = True) -> relevance.Weights:
    """The three models of relevance.py (with ``adapter``, those of relevance.SHIPPED, reading the
    adapted cosine the search gave each candidate; without, those of relevance.FALLBACK).  The query model: labels 1 for a question something
    stored answers (every LoCoMo question, weighted QUESTION_WEIGHT), 0 for the rest.  The
    memory model: over the candidates with a vector of answerable questions only (it estimates
    the chance given that something answers).  The words-only model: every candidate, read
    as a keyword-only search would (LoCoMo's weighted LOCOMO_WEIGHT in both)."""

    def is_talk(c: Candidates) -> bool:
        return c.question is not None

    def columns(c: Candidates) -> np.ndarray:
        if not adapter:
            return relevance.memory_features(c.matrix[c.has_vector])
        if c.adapted is None:
            raise SystemExit("the store's vectors have no query adapter: its relevance is relevance.FALLBACK")
        return relevance.memory_features(c.matrix[c.has_vector], c.adapted[c.has_vector])

    with_vector = [(c, columns(c)) for c in sets if c.has_vector.any()]
    query = _fit(
        np.array([relevance.query_features(x) for _, x in with_vector]),
        np.array([1.0 if c.answerable else 0.0 for c, _ in with_vector]),
        np.array([QUESTION_WEIGHT if is_talk(c) else 1.0 for c, _ in with_vector]),
    )
    answered = [(c, x) for c, x in with_vector if c.answerable]
    memory = _fit(
        np.vstack([x for _, x in answered]),
        np.concatenate([c.label[c.has_vector] for c, _ in answered]),
        np.concatenate([np.full(len(x), LOCOMO_WEIGHT if is_talk(c) else 1.0) for c, x in answered]),
    )
    words = _fit(
        np.vstack([relevance.words_features(_words_matrix(c)) for c in sets]),
        np.concatenate([c.label for c in sets]),
        np.concatenate([np.full(len(c.rowids), LOCOMO_WEIGHT if is_talk(c) else 1.0) for c in sets]),
    )
    shipped = relevance.SHIPPED if adapter else relevance.FALLBACK

    def named(names: Mapping[str, float], values: np.ndarray) -> dict[str, float]:
        return {name: round(float(v), 2) for name, v in zip(names, values, strict=True)}

    return relevance.Weights(named(shipped.query, query), named(shipped.memory, memory), named(shipped.words, words))


def predict(c: Candidates, weights: relevance.Weights) -> np.ndarray:
    adapted = c.adapted if "adapted" in weights.memory else None
    return relevance.estimate(c.matrix, c.has_vector, weights, adapted)


def shown(c: Candidates, p: np.ndarray, floor: float, limit: int, gate: float | None = None) -> list[int]:
    """The indices a call returns: the ranking model's order, nothing unless the best clears
    the query's gate (by default the one ``floor`` implies), at or above the floor, spread over
    episodes, cut at ``limit`` (as search.search does: relevance.at_least)."""
    index = {rowid: i for i, rowid in enumerate(c.rowids)}
    relevant = {rowid: float(p[i]) for rowid, i in index.items()}
    kept = relevance.at_least([(c.rowids[i], float(i)) for i in c.order], relevant, floor, gate)
    return [index[r] for r, _ in ranking.diversify(kept, c.created)][:limit]


def context_shown(c: Candidates, p: np.ndarray, threshold: float, check_kind: bool = True) -> list[int]:
    """The indices memory.context injects (service/context.py): twice its limit searched at
    search's floor, then relevance.for_context, then none if the question asks for a number or a
    time none of them holds (answer_kind.py)."""
    if threshold <= 0:
        return shown(c, p, 0.0, CONTEXT_LIMIT)
    floor = min(threshold, relevance.SEARCH_FLOOR) if threshold >= relevance.SEARCH_GATE else 0.0
    found = shown(c, p, floor, 2 * CONTEXT_LIMIT)
    chosen = [found[i] for i in relevance.for_context([float(p[j]) for j in found], threshold, CONTEXT_LIMIT)]
    return chosen if not check_kind or answer_kind.can_answer(c.text, [c.contents[i] for i in chosen]) else []


def fact_figures(
    sets: list[Candidates], ps: list[np.ndarray], context: float, floor: float, gate: float | None = None,
    check_kind: bool = True,
) -> dict[str, float]:  # fmt: skip
    top1, in_context, injected, unrelated_injected, unrelated_found = [], [], [], [], []
    for c, p in zip(sets, ps, strict=True):
        found = shown(c, p, floor, SEARCH_LIMIT, gate)
        injected_now = context_shown(c, p, context, check_kind)
        if c.answerable:
            answer = int(np.argmax(c.label))
            top1.append(bool(found) and found[0] == answer)
            in_context.append(answer in injected_now)
        elif c.unrelated:
            unrelated_injected.append(bool(injected_now))
            unrelated_found.append(bool(found))
        else:
            injected.append(bool(injected_now))
    return {"search top-1": float(np.mean(top1)), "fact in context": float(np.mean(in_context)),
            "unanswerable injected": float(np.mean(injected)),
            "unrelated injected": float(np.mean(unrelated_injected)),
            "unrelated with search hits": float(np.mean(unrelated_found))}  # fmt: skip


def top1(sets: list[Candidates], ps: list[np.ndarray], floor: float, gate: float | None = None) -> float:
    """The share of (answerable) questions whose answer is search's first hit."""
    right = [bool(found) and found[0] == int(np.argmax(c.label))
             for c, p in zip(sets, ps, strict=True) for found in [shown(c, p, floor, SEARCH_LIMIT, gate)]]  # fmt: skip
    return float(np.mean(right))


def locomo_figures(
    sets: list[Candidates], ps: list[np.ndarray], floor: float, labels_of: dict[int, list[str]],
    gate: float | None = None,
) -> dict[str, float]:  # fmt: skip
    scores = locomo.Scores()
    for c, p in zip(sets, ps, strict=True):
        assert c.question is not None
        scores.add(c.question, [labels_of.get(c.rowids[i], []) for i in shown(c, p, floor, locomo.LIMIT, gate)])
    summary = scores.summary()
    return {name: summary[name] for name in ("recall@10", "session_any@10", "mrr")}


def choose_context(sets: list[Candidates], ps: list[np.ndarray]) -> float:
    def gain(t: float) -> float:
        f = fact_figures(sets, ps, t, 0.0)
        return f["fact in context"] - f["unanswerable injected"]

    return max(CONTEXT_GRID, key=gain)


def choose_search(
    facts: list[Candidates], fact_ps: list[np.ndarray], talks: list[Candidates], talk_ps: list[np.ndarray],
    labels_of: dict[int, list[str]],
) -> tuple[float, float]:  # fmt: skip
    """memory.search's (gate, floor), on fitted personas and conversations only (``facts`` may
    hold answerable questions of sets never fitted on: the tests' paraphrase set).

    The gate first, with no per-hit floor: the lowest of GATE_GRID that leaves the most unrelated
    messages with no hits among those that keep the conversations' recall@10, session_any@10
    and MRR within FLOOR_SLACK of no threshold and lose no answerable question's first hit (a
    question left with no hits at all is the costlier mistake: the caller loses its answer).
    Then the floor: the highest of FLOOR_GRID that, with that gate, still keeps them there."""
    base = locomo_figures(talks, talk_ps, 0.0, labels_of)

    def fine(floor: float, gate: float) -> bool:
        figures = locomo_figures(talks, talk_ps, floor, labels_of, gate)
        return all(v >= base[k] - FLOOR_SLACK for k, v in figures.items())

    answerable = [(c, p) for c, p in zip(facts, fact_ps, strict=True) if c.answerable]
    unrelated = [p for c, p in zip(facts, fact_ps, strict=True) if c.unrelated]
    first = top1([c for c, _ in answerable], [p for _, p in answerable], 0.0, 0.0)

    def emptied(gate: float) -> float:
        if top1([c for c, _ in answerable], [p for _, p in answerable], 0.0, gate) < first:
            return -1.0
        return float(np.mean([not relevance.answers_anything(p.tolist(), gate) for p in unrelated]))

    gates = [g for g in GATE_GRID if fine(0.0, g)]
    gate = max(gates, key=lambda g: (emptied(g), -g))
    return gate, max(f for f in FLOOR_GRID if f <= gate and fine(f, gate))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, required=True, help="a directory written by retrieval.py --keep")
    parser.add_argument("--facts", type=Path, required=True, help="a directory written by relevance.py --keep")
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument(
        "--no-adapter", action="store_true", help="fit and score relevance.FALLBACK's models (no adapted cosine)"
    )
    args = parser.parse_args()
    adapter = not args.no_adapter
    conversations = locomo.load(args.data)
    model = SentenceModel(bundled_model_path(), expected_sha256=BUNDLED_SHA256)
    try:
        facts = collect_facts(args.facts, model)
        # The tests' paraphrase set is never fitted on: it only checks the search gate.
        checks = [c for c in facts if c.group == fact_set.PARAPHRASE_NAME]
        facts = [c for c in facts if c.group != fact_set.PARAPHRASE_NAME]
        talks = collect_locomo(args.db, conversations, model)
    finally:
        model.close()
    labels = json.loads((args.db / "labels.json").read_text())
    db = open_connection(args.db / "memoryd.db", busy_timeout_ms=5000, readonly=True)
    labels_of = {rowid: labels.get(mid, []) for rowid, mid in db.execute("SELECT rowid, id FROM memories")}
    db.close()

    personas = list(dict.fromkeys(c.group for c in facts))
    users = list(dict.fromkeys(c.group for c in talks))
    held_facts: dict[int, np.ndarray] = {}
    held_talks: dict[int, np.ndarray] = {}
    contexts, gates, floors = [], [], []
    print(
        "| fold (held out) | context threshold | search gate, floor | top-1 | fact in context | unanswerable injected "
        "| unrelated injected | unrelated with search hits |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for fold, persona in enumerate(personas):
        user = users[fold % len(users)]
        train = [c for c in facts if c.group != persona] + [c for c in talks if c.group != user]
        vector = fit(train, adapter)
        fitted_facts = [c for c in facts if c.group != persona]
        fitted_talks = [c for c in talks if c.group != user]
        context = choose_context(fitted_facts, [predict(c, vector) for c in fitted_facts])
        gate, floor = choose_search(
            fitted_facts + checks, [predict(c, vector) for c in fitted_facts + checks],
            fitted_talks, [predict(c, vector) for c in fitted_talks], labels_of,
        )  # fmt: skip
        contexts.append(context)
        gates.append(gate)
        floors.append(floor)
        mine = [c for c in facts if c.group == persona]
        mine_p = [predict(c, vector) for c in mine]
        for c, p in zip(mine, mine_p, strict=True):
            held_facts[id(c)] = p
        if fold < len(users):
            for c in (c for c in talks if c.group == user):
                held_talks[id(c)] = predict(c, vector)
        f = fact_figures(mine, mine_p, context, floor, gate)
        print(f"| {persona} + {user} | {context} | {gate}, {floor} | {f['search top-1']:.3f} | {f['fact in context']:.3f} | "
              f"{f['unanswerable injected']:.3f} | {f['unrelated injected']:.3f} | {f['unrelated with search hits']:.3f} |")  # fmt: skip
    # The median of the folds' choices, on the grid (a threshold finer than the folds agree on
    # would be noise).
    context, floor = round(statistics.median(contexts) * 20) / 20, statistics.median(floors)
    gate = statistics.median(gates)
    fp = [held_facts[id(c)] for c in facts]
    tp = [held_talks[id(c)] for c in talks]
    print(f"\nthresholds to ship (medians of the folds): context {context}, search gate {gate}, floor {floor}")
    print("\nheld out (each persona and conversation scored by the fold that did not fit it), shipped thresholds:")
    for name, value in fact_figures(facts, fp, context, floor, gate).items():
        print(f"  facts {name}: {value:.3f}")
    base = locomo_figures(talks, tp, 0.0, labels_of)
    for name, value in locomo_figures(talks, tp, floor, labels_of, gate).items():
        print(f"  LoCoMo {name}: {value:.3f} (no threshold: {base[name]:.3f})")
    print(
        "\nsearch gate trade-off, held out (floor as shipped; LoCoMo recall@10, session_any@10, MRR "
        "against no threshold / unrelated with search hits / search top-1):"
    )
    for g in GATE_GRID:
        lf = locomo_figures(talks, tp, min(floor, g), labels_of, g)
        f = fact_figures(facts, fp, context, min(floor, g), g)
        print(f"  {g}: " + ", ".join(f"{lf[k] - base[k]:+.3f}" for k in lf)
              + f" / {f['unrelated with search hits']:.3f} / {f['search top-1']:.3f}")  # fmt: skip
    print("\ncontext threshold trade-off, held out (fact in context / unanswerable injected / unrelated "
          "injected; the same without the answer-kind check):")  # fmt: skip
    for t in CONTEXT_GRID:
        f, g = fact_figures(facts, fp, t, 0.0), fact_figures(facts, fp, t, 0.0, check_kind=False)
        print(f"  {t:.2f}: {f['fact in context']:.3f} / {f['unanswerable injected']:.3f} / {f['unrelated injected']:.3f}"
              f"; {g['fact in context']:.3f} / {g['unanswerable injected']:.3f} / {g['unrelated injected']:.3f}")  # fmt: skip
    probabilities = np.concatenate(fp)
    observed = np.concatenate([c.label for c in facts])
    print("\ncalibration on the facts, held out (predicted -> observed share of answers):")
    for low, high in ((0, 0.05), (0.05, 0.2), (0.2, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 1.01)):
        mask = (probabilities >= low) & (probabilities < high)
        if mask.any():
            print(f"  [{low}, {high}): {int(mask.sum())} candidates, mean {probabilities[mask].mean():.3f}, "
                  f"observed {observed[mask].mean():.3f}")  # fmt: skip
    weights = fit(facts + talks, adapter)
    if checks:
        ps = [predict(c, weights) for c in checks]
        kept, free = (top1(checks, ps, f, g) for f, g in ((floor, gate), (0.0, 0.0)))
        low = min(float(p.max()) for p in ps)
        injected = [np.mean([int(np.argmax(c.label)) in context_shown(c, p, context, check) for c, p in zip(checks, ps, strict=True)])
                    for check in (True, False)]  # fmt: skip
        print(f"\nthe tests' paraphrase set (never fitted), weights fitted on everything: search top-1 {kept:.3f} "
              f"with the shipped gate and floor, {free:.3f} with none; lowest best relevance of a question {low:.4f}; "
              f"fact in context {injected[0]:.3f} ({injected[1]:.3f} without the answer-kind check)")  # fmt: skip
    print(f"\nweights fitted on everything (relevance.{'SHIPPED' if adapter else 'FALLBACK'}):")
    print(f"query={weights.query}\nmemory={weights.memory}\nwords={weights.words}")
    if not adapter:
        return
    fallback = fit(facts + talks, adapter=False)
    print("\nthe same without the adapted cosine (relevance.FALLBACK, for vectors the adapter does not apply to):")
    print(f"query={fallback.query}\nmemory={fallback.memory}\nwords={fallback.words}")


if __name__ == "__main__":
    main()
