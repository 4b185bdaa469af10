"""A learned query adapter: does a linear map on the query vector tell "answers it" from "on the
same topic" better than the plain cosine?

    python bench/fit_adapter.py [--train bench/data/relevance_train] [--locomo] [--no-folds] [--save adapter.npz]
    python bench/fit_adapter.py --relevance --db /tmp/locomo-db --facts /tmp/facts-db [--adapter-train-only]

The query's vector (the local model, the query's embedded form as search embeds it) is moved by
a linear map before the cosine, ``q' = normalize(q + U V^T q)`` (rank ``r``), or
``normalize(q + W q)`` (a full matrix); memories stay as stored, so the cost at search time is
one small product per query.  The map is fitted (numpy only: full-batch Adam on an explicit
gradient) on fact-style personas, every memory of a persona a candidate of each of its questions:

- an answerable question: a logistic loss on ``scale * cosine + bias`` for every memory (the
  answering fact 1, the others 0), and a softmax over its memories with the answering fact as the
  target (so that the order does not suffer);
- a question nothing answers (the ``[unanswerable]`` and ``[unrelated]`` lines): every memory 0,
  and the same logistic loss on a soft maximum of its cosines (the best memory is what decides);
- an L2 pull of the map toward nothing (``U V^T`` or ``W`` toward 0, the identity map).

Two evaluations, each against the plain cosine on the same questions:

- *train only*: fitted on the training personas (``--train``, a folder in bench/fact_set.py's
  format) and scored on the six personas of bench/data/relevance/;
- *leave one persona out*: for each persona of bench/data/relevance/, fitted on the training
  personas and the five others, and scored on it.

The rank and the penalty are chosen by cross-validation over the fitting personas (groups of
personas left out in turn), on the AUC plus the top-1 of the left-out groups.  The bars are
chosen on the fitting personas only: for the plain cosine on their cosines; for the adapter on
the cosines the inner fits gave the left-out groups (a bar chosen on the questions the adapter
was fitted on would sit too high).  As bench/compare_embedders.py measures them: top-1, the AUC
of the best cosine (answerable against unanswerable personal questions), and a bar on the best
cosine (a question gets the first five memories at or above it) chosen for at most 10 % of the
unanswerable questions injected or for the fact in the context of at least 95 % of the answerable
ones, with and without the answer-kind check.  ``--locomo`` also ranks LoCoMo dev's turns by the
cosine alone, plain and adapted (recall@10, session_any@10, MRR).  ``--save`` writes the
adapter of the train-only evaluation (``u`` and ``v``, or ``full``, float32).

``--relevance`` instead measures the adapted cosine as one more feature of relevance
(memoryd/store/relevance.py), with the folds of bench/fit_relevance.py (one persona and one LoCoMo
conversation held out; the stores of bench/retrieval.py --keep and bench/relevance.py --keep):
the best adapted cosine among a question's candidates as a column of the query model, and also
each candidate's adapted cosine as a column of the memory model.  The adapter (rank and penalty
``--rank``, ``--penalty``) is fitted in each fold on the training personas and the five other
personas, or once on the training personas alone (``--adapter-train-only``, rank and penalty chosen by the inner cross-validation
as above); relevance's models
are fitted and the context threshold chosen on the fold's fitted personas and conversations.  It
prints the held-out context trade-off, each persona at its own fold's threshold, and search's
top-1 and LoCoMo figures with the shipped gate and floor (the order is the ranking model's, as
shipped).  Nothing here reads a name, word or question of either set.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compare_embedders as ce  # noqa: E402
import fact_set  # noqa: E402
import fit_alignment as fa  # noqa: E402
import fit_relevance as fr  # noqa: E402
import locomo  # noqa: E402
from retrieval import default_data  # noqa: E402

from memoryd.embed.local import BUNDLED_SHA256, bundled_model_path  # noqa: E402
from memoryd.embed.query_form import embedded_form  # noqa: E402
from memoryd.embed.sentence_model import SentenceModel  # noqa: E402
from memoryd.store import relevance  # noqa: E402
from memoryd.store.sqlite.db.connection import open_connection  # noqa: E402

Matrix = npt.NDArray[np.float64]
TRAIN = Path(__file__).resolve().parent / "data" / "relevance_train"
#: Answer index of a question nothing answers (personal) and of an unrelated message.
UNANSWERABLE, UNRELATED = -1, -2
#: The ranks (0: a full matrix) and penalties tried by the inner cross-validation.
GRID = ((16, 0.001), (16, 0.0001), (64, 0.001), (0, 0.001))
INNER_FOLDS = 3
STEPS = 300
LEARNING_RATE = 0.01
RANK_TEMPERATURE = 20.0  # the softmax of the ranking term, over cosines
MAX_SHARPNESS = 50.0  # the soft maximum of an unanswerable question's cosines
WEIGHTS = {"positive": 1.0, "negative": 1.0, "rank": 1.0, "unanswerable": 1.0, "best": 2.0}


class Embedder:
    """The local model, with an optional cache of vectors by text (a .npz file)."""

    def __init__(self, cache: Path | None) -> None:
        self.model = SentenceModel(bundled_model_path(), expected_sha256=BUNDLED_SHA256)
        self.cache_path = cache
        self.cache: dict[str, npt.NDArray[np.float32]] = {}
        if cache is not None and cache.exists():
            with np.load(cache) as data:
                self.cache = {key: data[key] for key in data.files}
        self.added = 0

    def __call__(self, texts: Sequence[str]) -> Matrix:
        keys = [hashlib.sha1(text.encode()).hexdigest() for text in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self.cache}.items())
        for start in range(0, len(missing), 256):
            chunk = missing[start : start + 256]
            for (key, _), vector in zip(chunk, self.model.embed([t for _, t in chunk]), strict=True):
                self.cache[key] = vector
            self.added += len(chunk)
        return np.array([self.cache[key] for key in keys], dtype=np.float64).reshape(len(texts), -1)

    def save(self) -> None:
        if self.cache_path is not None and self.added:
            np.savez(self.cache_path, **self.cache)


@dataclass
class Persona:
    """One persona's memories and questions, embedded."""

    name: str
    facts: Matrix  # (memories, dim)
    contents: list[str]
    queries: Matrix  # (questions, dim): answerable, then unanswerable, then unrelated
    texts: list[str]
    answers: npt.NDArray[np.int64]  # index of the answering memory, or UNANSWERABLE / UNRELATED


def embedded(embed: Embedder, persona: fact_set.Persona, prefix: str = "") -> Persona:
    keys = list(persona.facts)
    contents = [persona.facts[key] for key in keys]
    items = [(text, keys.index(key)) for key, text in persona.questions]
    items += [(text, UNANSWERABLE) for text in persona.unanswerable]
    items += [(text, UNRELATED) for text in persona.unrelated]
    return Persona(
        prefix + persona.name,
        embed(contents),
        contents,
        embed([embedded_form(text) for text, _ in items]),
        [text for text, _ in items],
        np.array([answer for _, answer in items], dtype=np.int64),
    )


def unit(x: Matrix) -> Matrix:
    out: Matrix = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return out


@dataclass
class Adapter:
    """``q' = normalize(q + q M^T)`` with ``M = U V^T`` (``full`` None) or ``M = full``."""

    u: Matrix | None = None
    v: Matrix | None = None
    full: Matrix | None = None

    def moved(self, q: Matrix) -> Matrix:
        if self.full is not None:
            return q + q @ self.full.T
        if self.u is None or self.v is None:
            return q
        out: Matrix = q + (q @ self.v) @ self.u.T
        return out

    def __call__(self, q: Matrix) -> Matrix:
        return unit(self.moved(q))

    def matrix(self) -> Matrix:
        if self.full is not None:
            return self.full
        assert self.u is not None and self.v is not None
        out: Matrix = self.u @ self.v.T
        return out


def softplus(x: Matrix) -> Matrix:
    out: Matrix = np.logaddexp(0.0, x)
    return out


def sigmoid(x: Matrix) -> Matrix:
    out: Matrix = 0.5 * (1.0 + np.tanh(0.5 * x))
    return out


def loss_and_gradient(
    params: dict[str, Matrix], personas: list[Persona], penalty: float
) -> tuple[float, dict[str, Matrix]]:
    """The loss of the module docstring and its gradient with respect to every parameter
    (``u``, ``v`` or ``full``; ``scale``, ``bias``)."""
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    scale, bias = float(params["scale"][0]), float(params["bias"][0])
    answerable = sum(int((p.answers >= 0).sum()) for p in personas)
    others = sum(int((p.answers < 0).sum()) for p in personas)
    w_pos, w_neg, w_rank = (WEIGHTS[k] / max(1, answerable) for k in ("positive", "negative", "rank"))
    w_un, w_best = (WEIGHTS[k] / max(1, others) for k in ("unanswerable", "best"))
    total = 0.0
    for p in personas:
        q = p.queries
        if "full" in params:
            moved = q + q @ params["full"].T
        else:
            low = q @ params["v"]
            moved = q + low @ params["u"].T
        norm = np.linalg.norm(moved, axis=1, keepdims=True)
        qn = moved / norm
        cos = qn @ p.facts.T  # (questions, memories)
        z = scale * cos + bias
        n = cos.shape[1]
        rows = np.arange(len(q))
        yes = p.answers >= 0
        dz = np.zeros_like(cos)  # d loss / d z, for the per-memory logistic terms
        dcos = np.zeros_like(cos)  # d loss / d cos, for the softmax and soft-maximum terms
        # answerable: the fact up, the other memories down, the fact first among them
        a_rows, a_cols = rows[yes], p.answers[yes]
        za = z[a_rows, a_cols]
        total += w_pos * float(softplus(-za).sum())
        dz[a_rows, a_cols] -= w_pos * sigmoid(-za)
        mask = np.zeros_like(cos, dtype=bool)
        mask[a_rows] = True
        mask[a_rows, a_cols] = False
        total += w_neg / (n - 1) * float(softplus(z[mask]).sum())
        dz[mask] += w_neg / (n - 1) * sigmoid(z[mask])
        logits = RANK_TEMPERATURE * cos[a_rows]
        logits -= logits.max(axis=1, keepdims=True)
        soft = np.exp(logits)
        soft /= soft.sum(axis=1, keepdims=True)
        total -= w_rank * float(np.log(soft[np.arange(len(a_rows)), a_cols]).sum())
        soft[np.arange(len(a_rows)), a_cols] -= 1.0
        dcos[a_rows] += w_rank * RANK_TEMPERATURE * soft
        # nothing answers: every memory down, and the best of them (a soft maximum) down
        u_rows = rows[~yes]
        zu = z[u_rows]
        total += w_un / n * float(softplus(zu).sum())
        dz[u_rows] += w_un / n * sigmoid(zu)
        sharp = MAX_SHARPNESS * cos[u_rows]
        top = sharp.max(axis=1, keepdims=True)
        weights = np.exp(sharp - top)
        sums = weights.sum(axis=1, keepdims=True)
        best = (top + np.log(sums))[:, 0] / MAX_SHARPNESS
        zb = scale * best + bias
        total += w_best * float(softplus(zb).sum())
        gb = w_best * sigmoid(zb)
        dcos[u_rows] += (gb * scale)[:, None] * weights / sums
        grads["scale"] += float((gb * best).sum())
        grads["bias"] += float(gb.sum())
        # back through z, the cosine and the normalisation
        grads["scale"] += float((dz * cos).sum())
        grads["bias"] += float(dz.sum())
        dcos += scale * dz
        dq = dcos @ p.facts
        dmoved = (dq - (dq * qn).sum(axis=1, keepdims=True) * qn) / norm
        if "full" in params:
            grads["full"] += dmoved.T @ q
        else:
            grads["u"] += dmoved.T @ low
            grads["v"] += q.T @ (dmoved @ params["u"])
    if "full" in params:
        total += penalty * float((params["full"] ** 2).sum())
        grads["full"] += 2 * penalty * params["full"]
    else:
        u, v = params["u"], params["v"]
        total += penalty * float(((u @ v.T) ** 2).sum()) + 0.01 * penalty * float((u**2).sum() + (v**2).sum())
        grads["u"] += 2 * penalty * u @ (v.T @ v) + 0.02 * penalty * u
        grads["v"] += 2 * penalty * v @ (u.T @ u) + 0.02 * penalty * v
    return total, grads


def initial(rank: int, dim: int, seed: int = 0) -> dict[str, Matrix]:
    rng = np.random.default_rng(seed)
    params: dict[str, Matrix] = {"scale": np.array([10.0]), "bias": np.array([-5.0])}
    if rank:
        params["u"] = rng.normal(0.0, 0.01, (dim, rank))
        params["v"] = rng.normal(0.0, 0.01, (dim, rank))
    else:
        params["full"] = np.zeros((dim, dim))
    return params


def fit(personas: list[Persona], rank: int, penalty: float, steps: int = STEPS) -> Adapter:
    """Full-batch Adam from the identity map."""
    params = initial(rank, personas[0].facts.shape[1])
    first = {k: np.zeros_like(v) for k, v in params.items()}
    second = {k: np.zeros_like(v) for k, v in params.items()}
    for step in range(1, steps + 1):
        _, grads = loss_and_gradient(params, personas, penalty)
        for k in params:
            first[k] = 0.9 * first[k] + 0.1 * grads[k]
            second[k] = 0.999 * second[k] + 0.001 * grads[k] ** 2
            rate = LEARNING_RATE * (10.0 if k in ("scale", "bias") else 1.0)
            params[k] -= rate * (first[k] / (1 - 0.9**step)) / (np.sqrt(second[k] / (1 - 0.999**step)) + 1e-8)
    if rank:
        return Adapter(u=params["u"], v=params["v"])
    return Adapter(full=params["full"])


def check_gradient() -> None:
    """The explicit gradient against central differences, on random data (``--check``)."""
    rng = np.random.default_rng(1)
    personas = []
    for i in range(2):
        facts = unit(rng.normal(size=(7, 12)))
        queries = unit(rng.normal(size=(6, 12)))
        answers = np.array([0, 3, 5, UNANSWERABLE, UNANSWERABLE, UNRELATED], dtype=np.int64)
        personas.append(Persona(f"p{i}", facts, [""] * 7, queries, [""] * 6, answers))
    for rank in (3, 0):
        params = initial(rank, 12, seed=2)
        for k in params:
            if k not in ("scale", "bias"):
                params[k] = rng.normal(0.0, 0.3, params[k].shape)
        _, grads = loss_and_gradient(params, personas, 0.1)
        worst = 0.0
        for k, value in params.items():
            for index in np.ndindex(value.shape):
                old = value[index]
                value[index] = old + 1e-6
                up, _ = loss_and_gradient(params, personas, 0.1)
                value[index] = old - 1e-6
                down, _ = loss_and_gradient(params, personas, 0.1)
                value[index] = old
                worst = max(worst, abs((up - down) / 2e-6 - float(grads[k][index])))
        print(f"rank {rank or 'full'}: largest gradient error {worst:.2e}")


def asked(personas: list[Persona], adapter: Adapter | None) -> list[ce.Asked]:
    """compare_embedders' questions, with the plain or the adapted cosine."""
    out = []
    for p in personas:
        queries = p.queries if adapter is None else adapter(p.queries)
        for text, vector, answer in zip(p.texts, queries, p.answers, strict=True):
            out.append(
                ce.Asked(
                    p.name,
                    text,
                    p.facts @ vector,
                    p.contents,
                    int(answer) if answer >= 0 else None,
                    answer == UNRELATED,
                )
            )
    return out


def groups(personas: list[Persona], count: int) -> list[list[Persona]]:
    return [personas[i::count] for i in range(min(count, len(personas)))]


def cross_fitted(personas: list[Persona], rank: int, penalty: float) -> list[ce.Asked]:
    """Each inner group's questions with the adapter fitted on the other groups."""
    out: list[ce.Asked] = []
    for group in groups(personas, INNER_FOLDS):
        rest = [p for p in personas if p not in group]
        out += asked(group, fit(rest, rank, penalty))
    return out


@dataclass
class Fitted:
    adapter: Adapter
    rank: int
    penalty: float
    bar_questions: list[ce.Asked]  # the fitting personas' questions, cross-fitted


def fit_chosen(personas: list[Persona], log: list[str]) -> Fitted:
    """The rank and penalty with the best inner AUC + top-1, then the adapter fitted on all."""
    best: tuple[float, int, float, list[ce.Asked]] | None = None
    plain = asked(personas, None)
    log.append(f"plain cosine: AUC {ce.auc(plain):.3f} top-1 {ce.top1(plain):.3f}")
    for rank, penalty in GRID:
        questions = cross_fitted(personas, rank, penalty)
        value = ce.auc(questions) + ce.top1(questions)
        log.append(
            f"rank {rank or 'full'} penalty {penalty}: inner AUC {ce.auc(questions):.3f} top-1 {ce.top1(questions):.3f}"
        )
        if best is None or value > best[0]:
            best = (value, rank, penalty, questions)
    assert best is not None
    _, rank, penalty, questions = best
    return Fitted(fit(personas, rank, penalty), rank, penalty, questions)


# The bar rows: (label, answer-kind check, target).
BARS = (
    ("bar for at most 10 % unanswerable", False, "unans"),
    ("the same, with the answer-kind check", True, "unans"),
    ("bar for at least 95 % fact in context", False, "fact"),
    ("the same, with the answer-kind check", True, "fact"),
)


@dataclass
class Scored:
    """Held-out questions and, per bar row, the tally and the bars used."""

    questions: list[ce.Asked]
    tallies: list[ce.Tally]
    bars: list[list[float]]

    @classmethod
    def empty(cls) -> Scored:
        return cls([], [ce.Tally() for _ in BARS], [[] for _ in BARS])

    def add(self, scored: list[ce.Asked], bar_questions: list[ce.Asked]) -> None:
        self.questions += scored
        for i, (_, check, target) in enumerate(BARS):
            values, rule = ce.by_cosine(check)
            bar = ce.choose(bar_questions, values, rule, target)
            self.bars[i].append(bar)
            for q in scored:
                self.tallies[i].add(q, rule(q, bar))

    def curve(self, check: bool) -> str:
        """The fact in context at each share of CURVE of unanswerable questions injected, the bar
        chosen on these questions themselves (in-sample: how well the cosine separates them)."""
        values, rule = ce.by_cosine(check)
        out = []
        for cap in ce.CURVE:
            t = ce.tally(self.questions, rule, ce.choose(self.questions, values, rule, "unans", cap))
            out.append(f"{t.fact_in} at {t.injected}")
        return ", ".join(out)

    def rows(self) -> list[str]:
        personal = [q for q in self.questions if not q.unrelated]
        out = [
            f"{ce.top1(personal):.3f} ({sum(q.order[0] == q.answer for q in personal)})",
            f"{ce.auc(personal):.3f}",
            f"{ce.top5(personal):.3f}",
        ]
        for t, bars in zip(self.tallies, self.bars, strict=True):
            shown = ", ".join(f"{b:.2f}" for b in bars)
            out.append(
                f"{t.fact:.3f} / {t.unans:.3f} / {t.unrel:.3f} ({t.fact_in}/{t.answerable}, "
                f"{t.injected}/{t.unanswerable}; bar {shown})"
            )
        return out


def table(columns: dict[str, Scored], extra: dict[str, list[str]] | None = None) -> str:
    labels = ["top-1 (questions right)", "AUC of the best cosine", "the fact among the first five"]
    labels += [label for label, _, _ in BARS]
    labels += [
        "in-sample bar: facts in context at 3, 5, 6, 8, 12 unanswerable injected",
        "the same, with the answer-kind check",
    ]
    rows = {name: scored.rows() + [scored.curve(False), scored.curve(True)] for name, scored in columns.items()}
    lines = ["| | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for i, label in enumerate(labels):
        lines.append(f"| {label} | " + " | ".join(rows[name][i] for name in columns) + " |")
    for label, cells in (extra or {}).items():
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paraphrase_top1(paraphrase: Persona, adapter: Adapter | None) -> str:
    questions = asked([paraphrase], adapter)
    return f"{ce.top1(questions):.3f}"


def locomo_scores(embed: Embedder, data: Path, adapter: Adapter | None) -> locomo.Scores:
    """Each conversation's turns ranked by the cosine alone (deduplicated as memory.add does)."""
    scores = locomo.Scores()
    for conversation in locomo.load(data):
        labels: dict[str, list[str]] = {}
        for turn in conversation.turns:
            labels.setdefault(turn.content, []).append(turn.label)
        contents = list(labels)
        memories = embed(contents)
        queries = embed([embedded_form(q.text) for q in conversation.questions])
        if adapter is not None:
            queries = adapter(queries)
        for question, vector in zip(conversation.questions, queries, strict=True):
            order = np.argsort(-(memories @ vector), kind="stable")[: locomo.LIMIT]
            scores.add(question, [labels[contents[i]] for i in order])
    return scores


# --- the adapted cosine as a feature of relevance, held out as bench/fit_relevance.py does --------


@dataclass
class Extended:
    """relevance's models with one more score per candidate (the adapted cosine, or another):
    the query model reads the best of it among the candidates as one more column, and
    (``memory``) the memory model reads each candidate's.  ``base`` is FALLBACK's models, or
    SHIPPED's (which already read the adapted cosine the search gave each candidate)."""

    base: relevance.Weights
    query: Matrix
    memory: Matrix | None


def memory_columns(c: fr.Candidates, shipped: bool, rows: npt.NDArray[np.bool_] | None = None) -> Matrix:
    """relevance's memory columns of ``c``'s candidates (``rows``, by default those with a
    vector): SHIPPED's, with the adapted cosine the search read, or FALLBACK's."""
    rows = c.has_vector if rows is None else rows
    adapted = c.adapted[rows] if shipped and c.adapted is not None else None
    out: Matrix = relevance.memory_features(c.matrix[rows], adapted)
    return out


def fit_extended(
    sets: list[fr.Candidates], adapted: dict[int, Matrix], memory: bool, shipped: bool = False
) -> Extended:
    """``adapted``: each candidate set's extra score per candidate (by ``id``)."""
    base = fr.fit(sets, adapter=shipped)
    rows = [(c, memory_columns(c, shipped)) for c in sets if c.has_vector.any()]
    x = np.array([np.r_[relevance.query_features(m), adapted[id(c)][c.has_vector].max()] for c, m in rows])
    y = np.array([1.0 if c.answerable else 0.0 for c, _ in rows])
    w = np.array([fr.QUESTION_WEIGHT if c.question is not None else 1.0 for c, _ in rows])
    query = fr._fit(x, y, w)
    memory_weights = None
    if memory:
        answered = [(c, m) for c, m in rows if c.answerable]
        memory_weights = fr._fit(
            np.vstack([np.column_stack([m, adapted[id(c)][c.has_vector]]) for c, m in answered]),
            np.concatenate([c.label[c.has_vector] for c, _ in answered]),
            np.concatenate([np.full(len(m), fr.LOCOMO_WEIGHT if c.question is not None else 1.0) for c, m in answered]),
        )
    return Extended(base, query, memory_weights)


def predict_extended(c: fr.Candidates, model: Extended, adapted: Matrix) -> Matrix:
    if not c.has_vector.all():
        return fr.predict(c, model.base)
    _, memory, _ = model.base.arrays
    x = memory_columns(c, "adapted" in model.base.memory, np.ones(len(c.rowids), dtype=bool))
    q = np.r_[relevance.query_features(x), adapted.max()]
    answered = 1.0 / (1.0 + np.exp(-(q @ model.query[:-1] + model.query[-1])))
    if model.memory is not None:
        xm = np.column_stack([x, adapted])
        out: Matrix = answered / (1.0 + np.exp(-(xm @ model.memory[:-1] + model.memory[-1])))
    else:
        out = answered / (1.0 + np.exp(-(x @ memory[:-1] + memory[-1])))
    return out


@dataclass
class HeldSets:
    """The candidate sets of bench/fit_relevance.py: the fact set's (the paraphrases apart) and
    LoCoMo's, and the labels of the LoCoMo store's memories by rowid."""

    facts: list[fr.Candidates]
    talks: list[fr.Candidates]
    labels_of: dict[int, list[str]]

    @classmethod
    def load(cls, db: Path, facts: Path, data: Path, embed: Embedder) -> HeldSets:
        fact_sets = [c for c in fr.collect_facts(facts, embed.model) if c.group != fact_set.PARAPHRASE_NAME]
        talks = fr.collect_locomo(db, locomo.load(data), embed.model)
        labels: dict[str, list[str]] = json.loads((db / "labels.json").read_text())
        connection = open_connection(db / "memoryd.db", busy_timeout_ms=5000, readonly=True)
        labels_of = {rowid: labels.get(mid, []) for rowid, mid in connection.execute("SELECT rowid, id FROM memories")}
        connection.close()
        return cls(fact_sets, talks, labels_of)

    def folds(self) -> list[tuple[str, str]]:
        """(persona, conversation) held out together, as bench/fit_relevance.py pairs them."""
        personas = list(dict.fromkeys(c.group for c in self.facts))
        users = list(dict.fromkeys(c.group for c in self.talks))
        return [(persona, users[fold % len(users)]) for fold, persona in enumerate(personas)]


def print_held(
    sets: HeldSets, held: dict[str, dict[int, Matrix]], thresholds: dict[str, dict[str, float]], rows: int = 12
) -> None:
    """The held-out figures of each variant (its name, then each candidate set's relevance by
    ``id``, and each persona's fold threshold): the context trade-off, each persona at its
    fold's threshold, and search's top-1 and LoCoMo figures with the shipped gate and floor."""
    facts, talks = sets.facts, sets.talks
    variants = list(held)
    print(
        "\nrelevance held out (fact in context / unanswerable injected / unrelated injected, with the answer-kind check)\n"
    )
    print("| threshold | " + " | ".join(variants) + " |\n|---|" + "---|" * len(variants))
    for t in fr.CONTEXT_GRID[:rows]:
        cells = [
            " / ".join(f"{v:.3f}" for v in fa.figures(facts, [held[n][id(c)] for c in facts], t, None))
            for n in variants
        ]
        print(f"| {t:.2f} | " + " | ".join(cells) + " |")
    cells = []
    for name in variants:
        shown_now = {id(c): fr.context_shown(c, held[name][id(c)], thresholds[name][c.group]) for c in facts}
        shares = [
            float(np.mean([int(np.argmax(c.label)) in shown_now[id(c)] for c in facts if c.answerable])),
            float(np.mean([bool(shown_now[id(c)]) for c in facts if not c.answerable and not c.unrelated])),
            float(np.mean([bool(shown_now[id(c)]) for c in facts if c.unrelated])),
        ]
        chosen = sorted(set(thresholds[name].values()))
        cells.append(" / ".join(f"{v:.3f}" for v in shares) + f" ({chosen[0]}-{chosen[-1]})")
    print("| each fold's own threshold | " + " | ".join(cells) + " |")
    cells = []
    for name in variants:
        f = fr.fact_figures(facts, [held[name][id(c)] for c in facts], 0.25, relevance.SEARCH_FLOOR)
        lf = fr.locomo_figures(talks, [held[name][id(c)] for c in talks], relevance.SEARCH_FLOOR, sets.labels_of)
        cells.append(
            f"top-1 {f['search top-1']:.3f}, unrelated with hits {f['unrelated with search hits']:.3f}; "
            f"LoCoMo {lf['recall@10']:.3f} / {lf['session_any@10']:.3f} / {lf['mrr']:.3f}"
        )
    print("| search with the shipped gate and floor | " + " | ".join(cells) + " |")


def relevance_folds(args: argparse.Namespace, embed: Embedder, train: list[Persona], dev: list[Persona]) -> None:
    """Held out as bench/fit_relevance.py: per fold one persona and one LoCoMo conversation out;
    the adapter fitted on the training personas and the other five (rank and penalty fixed to
    ``--rank``/``--penalty``), relevance's models fitted with and without the adapted cosine on
    the rest, the context threshold chosen on the fitted personas; figures of the held-out ones."""
    sets = HeldSets.load(args.db, args.facts, args.data, embed)
    facts, talks = sets.facts, sets.talks
    everything = facts + talks
    queries = {id(c): embed([embedded_form(c.text)])[0] for c in everything}
    memories = {id(c): embed(c.contents) for c in everything}
    embed.save()
    # --adapter-train-only: one adapter, fitted on the training personas alone, for every fold
    # (its rank and penalty chosen as the train-only evaluation chooses them)
    train_only = None
    if args.adapter_train_only:
        log: list[str] = []
        chosen = fit_chosen(train, log)
        train_only = chosen.adapter
        print(f"adapter fitted on the training personas: rank {chosen.rank or 'full'}, penalty {chosen.penalty}")
    variants = ("shipped features", "+ best adapted cosine (query model)", "+ adapted cosine (both models)")
    held: dict[str, dict[int, Matrix]] = {v: {} for v in variants}
    thresholds: dict[str, dict[str, float]] = {v: {} for v in variants}
    for persona, user in sets.folds():
        if train_only is None:
            adapter = fit([p for p in train + dev if p.name != persona], args.rank, args.penalty)
        else:
            adapter = train_only
        adapted = {id(c): memories[id(c)] @ adapter(queries[id(c)][None, :])[0] for c in everything}
        fitting = [c for c in facts if c.group != persona] + [c for c in talks if c.group != user]
        fitted_facts = [c for c in facts if c.group != persona]
        mine = [c for c in everything if c.group in (persona, user)]
        models: dict[str, relevance.Weights | Extended] = {
            variants[0]: fr.fit(fitting, adapter=False),
            variants[1]: fit_extended(fitting, adapted, memory=False),
            variants[2]: fit_extended(fitting, adapted, memory=True),
        }
        for name, model in models.items():

            def predict(
                c: fr.Candidates, model: relevance.Weights | Extended = model, adapted: dict[int, Matrix] = adapted
            ) -> Matrix:
                if isinstance(model, Extended):
                    return predict_extended(c, model, adapted[id(c)])
                return fr.predict(c, model)

            thresholds[name][persona] = fr.choose_context(fitted_facts, [predict(c) for c in fitted_facts])
            for c in mine:
                held[name][id(c)] = predict(c)
        shown = {name: thresholds[name][persona] for name in variants}
        print(f"  fold {persona} / {user}: context thresholds {shown}", flush=True)
    print_held(sets, held, thresholds)


def relevance_arguments(parser: argparse.ArgumentParser, feature: str) -> None:
    """``--relevance`` (``feature`` as one more feature of relevance, held out) and the two stores
    it reads."""
    parser.add_argument("--relevance", action="store_true", help=f"only {feature} as a feature of relevance")
    parser.add_argument("--db", type=Path, help="with --relevance: a directory written by retrieval.py --keep")
    parser.add_argument("--facts", type=Path, help="with --relevance: a directory written by relevance.py --keep")


def check_relevance_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.relevance and (args.db is None or args.facts is None):
        parser.error("--relevance needs --db and --facts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, default=TRAIN, help="the training personas' folder")
    parser.add_argument("--cache", type=Path, help="a .npz of vectors by text, read and extended")
    parser.add_argument("--locomo", action="store_true", help="also rank LoCoMo dev by the cosine alone")
    parser.add_argument("--data", type=Path, default=default_data(), help="the LoCoMo file")
    parser.add_argument("--no-folds", action="store_true", help="only the train-only evaluation")
    parser.add_argument("--save", type=Path, help="write the adapter fitted on the training personas to this .npz")
    parser.add_argument("--check", action="store_true", help="check the gradient and stop")
    relevance_arguments(parser, "the adapted cosine")
    parser.add_argument(
        "--adapter-train-only", action="store_true", help="with --relevance: the adapter fitted on --train only"
    )
    parser.add_argument("--rank", type=int, default=16, help="with --relevance: the adapter's rank (0: full)")
    parser.add_argument("--penalty", type=float, default=0.001, help="with --relevance: the adapter's penalty")
    args = parser.parse_args()
    check_relevance_arguments(parser, args)
    if args.check:
        check_gradient()
        return
    started = time.perf_counter()
    embed = Embedder(args.cache)
    train = [embedded(embed, p, "train/") for p in fact_set.load(args.train)]
    dev = [embedded(embed, p) for p in fact_set.load()]
    paraphrase = embedded(embed, fact_set.paraphrase())
    embed.save()
    if not train:
        sys.exit(f"{args.train}: no training personas")
    if args.relevance:
        relevance_folds(args, embed, train, dev)
        embed.save()
        return
    print(
        f"{len(train)} training personas ({sum(len(p.texts) for p in train)} questions), "
        f"{len(dev)} evaluation personas; embedded in {time.perf_counter() - started:.0f} s\n"
    )

    # (a) fitted on the training personas only, scored on every evaluation persona
    log: list[str] = []
    fitted = fit_chosen(train, log)
    print("train only, inner cross-validation:\n  " + "\n  ".join(log))
    print(f"  chosen: rank {fitted.rank or 'full'}, penalty {fitted.penalty}\n")
    plain, adapted = Scored.empty(), Scored.empty()
    plain.add(asked(dev, None), asked(train, None))
    adapted.add(asked(dev, fitted.adapter), fitted.bar_questions)
    extra = {
        "top-1 of the tests' 27 paraphrases": [
            paraphrase_top1(paraphrase, None),
            paraphrase_top1(paraphrase, fitted.adapter),
        ]
    }
    if args.locomo:
        rows = [locomo_scores(embed, args.data, a).summary() for a in (None, fitted.adapter)]
        embed.save()
        extra["LoCoMo dev, cosine order: recall@10 / session_any@10 / MRR"] = [
            f"{r['recall@10']:.3f} / {r['session_any@10']:.3f} / {r['mrr']:.3f}" for r in rows
        ]
    print("fitted on the training personas, scored on the six evaluation personas")
    print("(bar rows: fact in context / unanswerable injected / unrelated injected)\n")
    print(table({"plain cosine": plain, "adapted cosine": adapted}, extra) + "\n")

    if not args.no_folds:
        # (b) leave one evaluation persona out: fitted on the training personas and the other five
        plain, adapted = Scored.empty(), Scored.empty()
        plain_dev, adapted_dev = Scored.empty(), Scored.empty()
        chosen = []
        for held in dev:
            fitting = train + [p for p in dev if p is not held]
            log = []
            fitted_fold = fit_chosen(fitting, log)
            chosen.append(f"{held.name}: rank {fitted_fold.rank or 'full'}, penalty {fitted_fold.penalty}")
            plain.add(asked([held], None), asked(fitting, None))
            adapted.add(asked([held], fitted_fold.adapter), fitted_fold.bar_questions)
            # the bars chosen on the other evaluation personas only (their style is closer)
            others = [p for p in dev if p is not held]
            plain_dev.add(asked([held], None), asked(others, None))
            names = {p.name for p in others}
            adapted_dev.add(
                asked([held], fitted_fold.adapter), [q for q in fitted_fold.bar_questions if q.persona in names]
            )
            print(f"  {chosen[-1]}", flush=True)
        print("\nleave one evaluation persona out (fitted on the training personas and the other five)\n")
        print(table({"plain cosine": plain, "adapted cosine": adapted}) + "\n")
        print("the same, the bars chosen on the other five evaluation personas only\n")
        print(table({"plain cosine": plain_dev, "adapted cosine": adapted_dev}) + "\n")

    if args.save:
        # The adapter of the train-only evaluation: relevance refitted on the evaluation personas
        # then reads adapted cosines of questions the adapter never saw, as a new user's would be.
        a = fitted.adapter
        if a.u is not None and a.v is not None:
            np.savez(args.save, u=a.u.astype(np.float32), v=a.v.astype(np.float32))
        else:
            np.savez(args.save, full=a.matrix().astype(np.float32))
        print(f"wrote {args.save}: rank {fitted.rank or 'full'}, penalty {fitted.penalty}")
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
