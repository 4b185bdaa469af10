"""Fit and check the search order among notes (ranking.search_order), held out by persona.

    python bench/relevance.py --no-locomo --keep /tmp/facts-db   # once: the fact store
    python bench/fit_order.py --facts /tmp/facts-db

For every answerable question of the fact set (bench/data/relevance/) the store's own candidate
generation runs in-process, with the query embedded as the daemon embeds it
(query_form.embedded_form).  Among each question's candidates, a conditional logit (one softmax
over the candidates, the answer its label) weighs the cosine and the cue of
ranking.search_order (the query asks for a specific and the memory holds one); the bonus is
the cue's weight over the cosine's.  Six times over, fitted on five personas and scored on the
sixth: the share of questions whose fact comes first with the ranking model's order, the cosine
alone, the cosine plus the fold's bonus, and the order the daemon ships (ranking.search_order,
SPECIFIC_BONUS).  Nothing here reads a name, word or question of the set.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fact_set  # noqa: E402
import fit_relevance  # noqa: E402

from memoryd.embed.local import BUNDLED_SHA256, bundled_model_path  # noqa: E402
from memoryd.embed.sentence_model import SentenceModel  # noqa: E402
from memoryd.store import ranking  # noqa: E402
from memoryd.store.sqlite.db.connection import open_connection  # noqa: E402
from memoryd.store.visibility import Scope  # noqa: E402

L2 = 0.1


def collect(folder: Path, model: SentenceModel) -> list[tuple[str, np.ndarray, np.ndarray, int, list[int]]]:
    """Per answerable question: (persona, cosines, cue, index of the answer, shipped order)."""
    ids: dict[str, dict[str, str]] = json.loads((folder / "facts.json").read_text())
    db = open_connection(folder / "memoryd.db", busy_timeout_ms=5000, readonly=True)
    try:
        space = fit_relevance.vectors.read_space(db)
        rowid_of = dict(db.execute("SELECT id, rowid FROM memories"))
        out = []
        for persona in fact_set.load():
            texts = [text for _, text in persona.questions]
            for (key, text), unit in zip(persona.questions, fit_relevance._embed(model, texts), strict=True):
                found = fit_relevance._candidates(db, Scope(persona.name), text, unit, space, 10)
                keep = [i for i, rowid in enumerate(found.rowids) if rowid in found.cosines]
                rowids = [found.rowids[i] for i in keep]
                cosines = np.array([found.cosines[rowid] for rowid in rowids])
                asks = ranking.asks_specific(text)
                cue = np.array([asks and ranking.holds_specific(found.texts[rowid]) for rowid in rowids], float)
                shipped = [rowids.index(found.rowids[i]) for i in fit_relevance._ranked(found, text) if i in keep]
                out.append((persona.name, cosines, cue, rowids.index(rowid_of[ids[persona.name][key]]), shipped))
        return out
    finally:
        db.close()


def fit(rows: list[tuple[str, np.ndarray, np.ndarray, int, list[int]]]) -> np.ndarray:
    """Conditional logit weights (cosine, cue), Newton steps with a little L2."""
    w = np.zeros(2)
    for _ in range(50):
        gradient, hessian = L2 * w, L2 * np.eye(2)
        for _, cosines, cue, answer, _ in rows:
            x = np.column_stack((cosines, cue))
            s = x @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            mean = x.T @ p
            gradient += mean - x[answer]
            hessian += x.T @ (x * p[:, None]) - np.outer(mean, mean)
        w -= np.linalg.solve(hessian, gradient)
    return w


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=Path, required=True, help="a directory written by relevance.py --keep")
    args = parser.parse_args()
    model = SentenceModel(bundled_model_path(), expected_sha256=BUNDLED_SHA256)
    try:
        rows = collect(args.facts, model)
    finally:
        model.close()
    personas = list(dict.fromkeys(row[0] for row in rows))
    first: dict[str, list[bool]] = {"cosine alone": [], "cosine + the fold's bonus": [], "shipped order": []}
    print("| held out | questions | bonus fitted on the others | cosine alone | cosine + bonus | shipped order |")
    print("|---|---|---|---|---|---|")
    for persona in personas:
        w = fit([row for row in rows if row[0] != persona])
        bonus = w[1] / w[0]
        mine = [row for row in rows if row[0] == persona]
        cells = {
            "cosine alone": [int(np.argmax(c)) == a for _, c, _, a, _ in mine],
            "cosine + the fold's bonus": [int(np.argmax(c + bonus * k)) == a for _, c, k, a, _ in mine],
            "shipped order": [order[0] == a for _, _, _, a, order in mine],
        }
        for name, values in cells.items():
            first[name] += values
        shares = " | ".join(f"{np.mean(values):.3f}" for values in cells.values())
        print(f"| {persona} | {len(mine)} | {bonus:.3f} | {shares} |")
    print()
    for name, values in first.items():
        print(f"held out, {name}: {np.mean(values):.3f} ({sum(values)} of {len(values)})")
    w = fit(rows)
    print(f"\nbonus fitted on every persona: {w[1] / w[0]:.3f} (ranking.SPECIFIC_BONUS = {ranking.SPECIFIC_BONUS})")


if __name__ == "__main__":
    main()
