"""Re-centring the local model's vectors before the cosine, held out by persona (left out).

    python bench/fit_centering.py

The fact set's memories and questions (bench/data/relevance/, the question embedded as search
embeds it) are embedded with the local model, and for each persona the cosine is measured after
moving both sides by a mean computed without that persona (or from its own memories only, as a
scope's centroid would be).  Printed per variant, over the six personas: the cosine's top-1 on
the answerable questions; the AUC of the best cosine for "something answers" (answerable against
the unanswerable personal questions); and, at the bars that leave 12.5 %, 10 % and 6.25 % of the
unanswerable questions with a best cosine above them, the share of answerable questions whose
fact is among the first five and whose best cosine is above the bar.  In-process, seconds.
Nothing here reads a name, word or question of the set.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fact_set  # noqa: E402

from memoryd.embed.local import BUNDLED_SHA256, bundled_model_path  # noqa: E402
from memoryd.embed.query_form import embedded_form  # noqa: E402
from memoryd.embed.sentence_model import SentenceModel  # noqa: E402

Matrix = npt.NDArray[np.float64]
Move = Callable[[Matrix], Matrix]
#: Shares of unanswerable questions left above the bar.
CAPS = (0.125, 0.10, 0.0625)


class Embedded:
    def __init__(self, model: SentenceModel, persona: fact_set.Persona) -> None:
        keys = list(persona.facts)
        self.facts = embed(model, [persona.facts[key] for key in keys])
        self.questions = embed(model, [embedded_form(question) for _, question in persona.questions])
        self.unanswerable = embed(model, [embedded_form(question) for question in persona.unanswerable])
        self.answers = [keys.index(key) for key, _ in persona.questions]


def embed(model: SentenceModel, texts: list[str]) -> Matrix:
    return np.asarray(model.embed(texts), dtype=np.float64)


def unit(x: Matrix) -> Matrix:
    norms: Matrix = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / norms


def shifted(mean: Matrix, share: float, drop: Matrix | None = None) -> Move:
    """Subtract ``share`` of ``mean`` (then the ``drop`` directions), and renormalise."""

    def move(x: Matrix) -> Matrix:
        y = x - share * mean
        if drop is not None:
            y = y - (y @ drop.T) @ drop
        return unit(y)

    return move


def score(sets: dict[str, Embedded], moves: Callable[[list[str], str], tuple[Move, Move]]) -> str:
    top1: list[bool] = []
    best_answerable: list[float] = []
    ranks: list[int] = []
    best_unanswerable: list[float] = []
    for name, data in sets.items():
        others = [other for other in sets if other != name]
        memory_move, query_move = moves(others, name)
        facts = memory_move(data.facts)
        for question, answer in zip(query_move(data.questions), data.answers, strict=True):
            cosines = facts @ question
            order = list(np.argsort(-cosines))
            top1.append(order[0] == answer)
            best_answerable.append(float(cosines.max()))
            ranks.append(order.index(answer))
        best_unanswerable.extend(float((facts @ question).max()) for question in query_move(data.unanswerable))
    answerable, unanswerable, rank = np.array(best_answerable), np.array(best_unanswerable), np.array(ranks)
    auc = float((answerable[:, None] > unanswerable[None, :]).mean())
    shares = []
    for cap in CAPS:
        bar = np.quantile(unanswerable, 1 - cap)
        shares.append(float(((answerable > bar) & (rank < 5)).mean()))
    return f"top-1 {np.mean(top1):.3f}  AUC {auc:.3f}  fact above the bar " + " / ".join(f"{s:.3f}" for s in shares)


def main() -> None:
    model = SentenceModel(bundled_model_path(), expected_sha256=BUNDLED_SHA256)
    sets = {persona.name: Embedded(model, persona) for persona in fact_set.load()}

    def memories_mean(names: list[str]) -> Matrix:
        return np.vstack([sets[name].facts for name in names]).mean(axis=0)

    def questions_mean(names: list[str]) -> Matrix:
        return np.vstack([np.vstack([sets[n].questions, sets[n].unanswerable]) for n in names]).mean(axis=0)

    def top_directions(names: list[str], count: int) -> Matrix:
        stacked = np.vstack([sets[name].facts for name in names])
        _, _, rows = np.linalg.svd(stacked - stacked.mean(axis=0), full_matrices=False)
        directions: Matrix = rows[:count]
        return directions

    plain = shifted(np.zeros(1), 0.0)
    print(f"{'the cosine as it is':52s} {score(sets, lambda others, name: (plain, plain))}")
    for share in (0.5, 1.0):
        variants: dict[str, Callable[[list[str], str], tuple[Move, Move]]] = {
            "both on the other personas' memories' mean": lambda o, n, s=share: (
                shifted(memories_mean(o), s),
                shifted(memories_mean(o), s),
            ),
            "each side on its own mean": lambda o, n, s=share: (
                shifted(memories_mean(o), s),
                shifted(questions_mean(o), s),
            ),
            "both on the user's own memories' mean": lambda o, n, s=share: (
                shifted(sets[n].facts.mean(axis=0), s),
                shifted(sets[n].facts.mean(axis=0), s),
            ),
        }
        for label, moves in variants.items():
            print(f"{label + f', share {share}':52s} {score(sets, moves)}")
    for count in (1, 2, 3, 5):
        print(
            f"{f'mean and first {count} directions removed':52s} "
            + score(
                sets,
                lambda o, n, c=count: (
                    shifted(memories_mean(o), 1.0, top_directions(o, c)),
                    shifted(memories_mean(o), 1.0, top_directions(o, c)),
                ),
            )
        )


if __name__ == "__main__":
    main()
