"""A pair model over the stored vectors: does a small network reading the query's and a memory's
vectors together tell "answers it" from "on the same topic" better than the adapted cosine?

    python bench/fit_pair_model.py [--train bench/data/relevance_train] [--cache vectors.npz]
        [--hidden 32] [--penalty 0.01] [--epochs 30] [--seeds 5]
    python bench/retrieval.py --keep /tmp/locomo-db      # once: the LoCoMo store
    python bench/relevance.py --no-locomo --keep /tmp/facts-db   # once: the fact store
    python bench/fit_pair_model.py --relevance --db /tmp/locomo-db --facts /tmp/facts-db

For a query ``q`` (the local model's vector of its embedded form), its adapted vector ``q'`` (the
shipped query adapter, memoryd/store/query_adapter.py) and a memory's stored vector ``m``, the
features are ``q' * m`` (elementwise), ``|q - m|``, the cosine and the adapted cosine (770
columns); a network with one hidden layer (ReLU, ``--hidden`` units) gives a score.  It is fitted
(numpy only: Adam on minibatches of 4096 pairs, the gradient written out, an L2 penalty
``--penalty`` on both weight matrices) on the training personas of bench/data/relevance_train/:
every memory of a persona a candidate of each of its questions, label 1 for the answering fact
and 0 for every other pair (a question nothing answers has only 0s), the positives weighted to a
quarter of the negatives' total.  ``--seeds`` networks from different starts are averaged.

Scored on the six personas of bench/data/relevance/ (never seen), every memory of the persona a
candidate, against the plain and the adapted cosine on the same questions, as bench/fit_adapter.py
measures them: top-1, the AUC of the best score (answerable against unanswerable personal
questions), the fact among the first five, bars on the best score chosen on the other five
personas, and one bar chosen on all six (in-sample: how well the score separates them).

``--relevance`` instead measures the pair model's score as one more feature of relevance
(memoryd/store/relevance.py, the shipped models, which already read the adapted cosine), with the
folds of bench/fit_relevance.py (one persona and one LoCoMo conversation held out; the stores of
bench/retrieval.py --keep and bench/relevance.py --keep): the best pair score among a question's
candidates as a column of the query model, and also each candidate's as a column of the memory
model.  The pair model is fitted once, on the training personas; relevance's models and the
context threshold in each fold on the fold's fitted personas and conversations.  Nothing here
reads a name, word or question of either set.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compare_embedders as ce  # noqa: E402
import fact_set  # noqa: E402
import fit_adapter  # noqa: E402
import fit_relevance as fr  # noqa: E402
from fit_adapter import Adapter, Embedder, Persona, Scored  # noqa: E402
from retrieval import default_data  # noqa: E402

from memoryd.embed.query_form import embedded_form  # noqa: E402
from memoryd.store import query_adapter, relevance  # noqa: E402

Matrix = npt.NDArray[np.float64]
Floats = npt.NDArray[np.float32]
BATCH = 4096
LEARNING_RATE = 0.003
POSITIVE_SHARE = 0.25  # the positives' total weight against the negatives'


def features(q: Matrix, adapted: Matrix, memories: Matrix) -> Floats:
    """One row per memory: ``q' * m``, ``|q - m|``, the cosine and the adapted cosine."""
    return np.hstack(
        [
            adapted[None, :] * memories,
            np.abs(q[None, :] - memories),
            (memories @ q)[:, None],
            (memories @ adapted)[:, None],
        ]
    ).astype(np.float32)


def training_pairs(personas: list[Persona], adapter: Adapter) -> tuple[Floats, Floats]:
    x, y = [], []
    for p in personas:
        moved = adapter(p.queries)
        for query, adapted, answer in zip(p.queries, moved, p.answers, strict=True):
            x.append(features(query, adapted, p.facts))
            y.append((np.arange(len(p.facts)) == answer).astype(np.float32))
    return np.vstack(x), np.concatenate(y)


Network = list[Floats]  # W1 (features x hidden), b1, w2 (hidden), b2 (1)


def train(x: Floats, y: Floats, hidden: int, penalty: float, epochs: int, seed: int) -> Network:
    """Adam on minibatches, from He-initialised weights and a low output bias."""
    rng = np.random.default_rng(seed)
    d = x.shape[1]
    net: Network = [
        (rng.standard_normal((d, hidden)) * np.sqrt(2 / d)).astype(np.float32),
        np.zeros(hidden, np.float32),
        (rng.standard_normal(hidden) * 0.01).astype(np.float32),
        np.array([-3.0], np.float32),
    ]
    first = [np.zeros_like(p) for p in net]
    second = [np.zeros_like(p) for p in net]
    positive = (len(y) - y.sum()) / y.sum() * POSITIVE_SHARE
    weight = np.where(y > 0, positive, 1.0).astype(np.float32)
    step = 0
    for _ in range(epochs):
        order = rng.permutation(len(y))
        for start in range(0, len(y), BATCH):
            idx = order[start : start + BATCH]
            xb, yb, wb = x[idx], y[idx], weight[idx]
            h = xb @ net[0] + net[1]
            a = np.maximum(h, 0)
            p = 1 / (1 + np.exp(-(a @ net[2] + net[3][0])))
            g = wb * (p - yb) / wb.sum()  # d loss / d logit, the weighted mean logistic loss
            ga = np.outer(g, net[2]) * (h > 0)
            grads = [xb.T @ ga + penalty * net[0], ga.sum(0), a.T @ g + penalty * net[2], np.array([g.sum()])]
            step += 1
            for j, (param, grad) in enumerate(zip(net, grads, strict=True)):
                first[j] = 0.9 * first[j] + 0.1 * grad
                second[j] = 0.999 * second[j] + 0.001 * grad * grad
                param -= LEARNING_RATE * (first[j] / (1 - 0.9**step)) / (np.sqrt(second[j] / (1 - 0.999**step)) + 1e-8)
    return net


def score(nets: list[Network], x: Floats) -> Matrix:
    """The networks' mean logit."""
    out: Matrix = np.mean(
        [np.maximum(x @ net[0] + net[1], 0) @ net[2] + net[3][0] for net in nets], axis=0, dtype=np.float64
    )
    return out


def check_gradient() -> None:
    """The written-out gradient against central differences, on random data (``--check``)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 6))
    y = (rng.random(50) < 0.3).astype(np.float64)
    w = np.where(y > 0, 2.0, 1.0)
    net = [rng.standard_normal((6, 4)), rng.standard_normal(4), rng.standard_normal(4), np.array([0.1])]

    def loss(net: list[Matrix]) -> float:
        z = np.maximum(x @ net[0] + net[1], 0) @ net[2] + net[3][0]
        return float((w * (np.logaddexp(0, z) - y * z)).sum() / w.sum())

    h = x @ net[0] + net[1]
    a = np.maximum(h, 0)
    p = 1 / (1 + np.exp(-(a @ net[2] + net[3][0])))
    g = w * (p - y) / w.sum()
    ga = np.outer(g, net[2]) * (h > 0)
    grads = [x.T @ ga, ga.sum(0), a.T @ g, np.array([g.sum()])]
    worst = 0.0
    for param, grad in zip(net, grads, strict=True):
        for index in np.ndindex(param.shape):
            old = param[index]
            param[index] = old + 1e-6
            up = loss(net)
            param[index] = old - 1e-6
            down = loss(net)
            param[index] = old
            worst = max(worst, abs((up - down) / 2e-6 - float(grad[index])))
    print(f"largest gradient error {worst:.2e}")


def scored_asked(personas: list[Persona], adapter: Adapter, nets: list[Network]) -> list[ce.Asked]:
    """compare_embedders' questions with the pair model's score in place of the cosine."""
    out = []
    for p in personas:
        moved = adapter(p.queries)
        for text, query, adapted, answer in zip(p.texts, p.queries, moved, p.answers, strict=True):
            out.append(
                ce.Asked(
                    p.name,
                    text,
                    score(nets, features(query, adapted, p.facts)),
                    p.contents,
                    int(answer) if answer >= 0 else None,
                    answer == fit_adapter.UNRELATED,
                )
            )
    return out


def held_by_persona(questions: list[ce.Asked]) -> Scored:
    """Each persona's questions, the bars chosen on the other personas' questions."""
    scored = Scored.empty()
    for persona in dict.fromkeys(q.persona for q in questions):
        scored.add([q for q in questions if q.persona == persona], [q for q in questions if q.persona != persona])
    return scored


def relevance_folds(args: argparse.Namespace, embed: Embedder, adapter: Adapter, nets: list[Network]) -> None:
    """The pair score as a column of relevance's query model, and of both models, against the
    shipped models, held out as bench/fit_relevance.py holds them out."""
    sets = fit_adapter.HeldSets.load(args.db, args.facts, args.data, embed)
    facts, talks = sets.facts, sets.talks
    everything = facts + talks
    pair: dict[int, Matrix] = {}
    for c in everything:
        query = embed([embedded_form(c.text)])[0]
        memories = embed(c.contents)
        pair[id(c)] = score(nets, features(query, adapter(query[None, :])[0], memories)) if c.contents else np.zeros(0)
    embed.save()
    variants = ("shipped", "+ best pair score (query model)", "+ pair score (both models)")
    held: dict[str, dict[int, Matrix]] = {v: {} for v in variants}
    thresholds: dict[str, dict[str, float]] = {v: {} for v in variants}
    for persona, user in sets.folds():
        fitting = [c for c in facts if c.group != persona] + [c for c in talks if c.group != user]
        fitted_facts = [c for c in facts if c.group != persona]
        models: dict[str, relevance.Weights | fit_adapter.Extended] = {
            variants[0]: fr.fit(fitting, adapter=True),
            variants[1]: fit_adapter.fit_extended(fitting, pair, memory=False, shipped=True),
            variants[2]: fit_adapter.fit_extended(fitting, pair, memory=True, shipped=True),
        }
        for name, model in models.items():

            def predict(c: fr.Candidates, model: relevance.Weights | fit_adapter.Extended = model) -> Matrix:
                if isinstance(model, fit_adapter.Extended):
                    return fit_adapter.predict_extended(c, model, pair[id(c)])
                out: Matrix = fr.predict(c, model)
                return out

            thresholds[name][persona] = fr.choose_context(fitted_facts, [predict(c) for c in fitted_facts])
            for c in everything:
                if c.group in (persona, user):
                    held[name][id(c)] = predict(c)
        shown = {name: thresholds[name][persona] for name in variants}
        print(f"  fold {persona} / {user}: context thresholds {shown}", flush=True)
    fit_adapter.print_held(sets, held, thresholds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, default=fit_adapter.TRAIN, help="the training personas' folder")
    parser.add_argument("--cache", type=Path, help="a .npz of vectors by text, read and extended")
    parser.add_argument("--hidden", type=int, default=32, help="hidden units")
    parser.add_argument("--penalty", type=float, default=0.01, help="L2 penalty on the weights")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=5, help="networks averaged")
    parser.add_argument("--check", action="store_true", help="check the gradient and stop")
    fit_adapter.relevance_arguments(parser, "the pair score")
    parser.add_argument("--data", type=Path, default=default_data(), help="the LoCoMo file")
    args = parser.parse_args()
    fit_adapter.check_relevance_arguments(parser, args)
    if args.check:
        check_gradient()
        return
    started = time.perf_counter()
    matrix = query_adapter.matrix()
    if matrix is None:
        sys.exit("the shipped query adapter could not be read")
    adapter = Adapter(full=matrix.astype(np.float64))
    embed = Embedder(args.cache)
    train_set = [fit_adapter.embedded(embed, p, "train/") for p in fact_set.load(args.train)]
    dev = [fit_adapter.embedded(embed, p) for p in fact_set.load()]
    embed.save()
    if not train_set:
        sys.exit(f"{args.train}: no training personas")
    x, y = training_pairs(train_set, adapter)
    print(
        f"{len(train_set)} training personas ({sum(len(p.texts) for p in train_set)} questions, {len(y)} pairs, "
        f"{x.shape[1]} features), {len(dev)} evaluation personas; prepared in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    nets = []
    for seed in range(args.seeds):
        begun = time.perf_counter()
        nets.append(train(x, y, args.hidden, args.penalty, args.epochs, seed))
        alone = scored_asked(dev, adapter, nets[-1:])
        print(
            f"  seed {seed}: fact-set AUC {ce.auc(alone):.3f}, top-1 {ce.top1(alone):.3f} "
            f"({time.perf_counter() - begun:.0f} s)",
            flush=True,
        )
    del x, y
    if args.relevance:
        relevance_folds(args, embed, adapter, nets)
        return
    columns = {
        "plain cosine": held_by_persona(fit_adapter.asked(dev, None)),
        "adapted cosine": held_by_persona(fit_adapter.asked(dev, adapter)),
        f"pair model, {args.seeds} averaged": held_by_persona(scored_asked(dev, adapter, nets)),
    }
    print(
        f"\nhidden {args.hidden}, penalty {args.penalty}, {args.epochs} epochs; scored on the six evaluation personas, "
        "every memory a candidate; bars chosen on the other five\n"
        "(bar rows: fact in context / unanswerable injected / unrelated injected)\n"
    )
    print(fit_adapter.table(columns) + "\n")
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
