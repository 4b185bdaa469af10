"""Precision and recall of the offline supersession rules on a labelled set of pairs.

    python -m memoryd.knowledge.evaluate [PAIRS.jsonl] [--errors]

Each line: {old, new, old_subjects?, new_subjects?, old_speaker?, new_speaker?, label, note},
label "conflict" or "coexist"; the note's text before ":" is its category.  A pair counts as
predicted "conflict" only when the rules say so; "unknown" counts as not superseding.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import msgspec

from memoryd.knowledge.conflict import Decision, Statement, decide

DEFAULT_PAIRS = Path(__file__).resolve().parents[2] / "tests" / "data" / "supersession_pairs.jsonl"


class LabelledPair(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    old: str
    new: str
    label: Literal["conflict", "coexist"]
    note: str
    old_subjects: tuple[str, ...] = ()
    new_subjects: tuple[str, ...] = ()
    old_speaker: str | None = None
    new_speaker: str | None = None

    @property
    def category(self) -> str:
        return self.note.partition(":")[0].strip()

    def decide(self) -> Decision:
        return decide(
            Statement(self.old, self.old_subjects, self.old_speaker),
            Statement(self.new, self.new_subjects, self.new_speaker),
        )


#: Confusion-matrix cells as (the rules said "supersedes", the label says "conflict").
TRUE_POS, FALSE_POS, FALSE_NEG, TRUE_NEG = (True, True), (True, False), (False, True), (False, False)


@dataclass
class Scores:
    #: Pairs counted by cell (TRUE_POS ...).
    counts: Counter[tuple[bool, bool]] = field(default_factory=Counter)
    errors: list[tuple[LabelledPair, Decision]] = field(default_factory=list)

    def add(self, pair: LabelledPair, decision: Decision) -> None:
        predicted, actual = decision.supersedes, pair.label == "conflict"
        self.counts[predicted, actual] += 1
        if predicted != actual:
            self.errors.append((pair, decision))

    @property
    def total(self) -> int:
        return self.counts.total()

    @property
    def precision(self) -> float:
        true_pos, predicted = self.counts[TRUE_POS], self.counts[TRUE_POS] + self.counts[FALSE_POS]
        return true_pos / predicted if predicted else 1.0

    @property
    def recall(self) -> float:
        true_pos, actual = self.counts[TRUE_POS], self.counts[TRUE_POS] + self.counts[FALSE_NEG]
        return true_pos / actual if actual else 1.0


def load_pairs(path: Path = DEFAULT_PAIRS) -> list[LabelledPair]:
    decoder = msgspec.json.Decoder(LabelledPair)
    return [decoder.decode(line) for line in path.read_bytes().splitlines() if line.strip()]


def evaluate(pairs: Iterable[LabelledPair]) -> tuple[Scores, dict[str, Scores]]:
    """Overall scores and scores per category."""
    overall, by_category = Scores(), dict[str, Scores]()
    for pair in pairs:
        decision = pair.decide()
        overall.add(pair, decision)
        by_category.setdefault(pair.category, Scores()).add(pair, decision)
    return overall, by_category


def format_table(overall: Scores, by_category: dict[str, Scores]) -> str:
    header = f"{'category':<18}{'pairs':>6}{'TP':>5}{'FP':>5}{'FN':>5}{'TN':>5}{'precision':>11}{'recall':>8}"
    lines = [header, "-" * len(header)]
    rows = sorted(by_category.items()) + [("ALL", overall)]
    for name, s in rows:
        if name == "ALL":
            lines.append("-" * len(header))
        cells = "".join(f"{s.counts[cell]:>5}" for cell in (TRUE_POS, FALSE_POS, FALSE_NEG, TRUE_NEG))
        lines.append(f"{name:<18}{s.total:>6}{cells}{s.precision:>11.3f}{s.recall:>8.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="?", type=Path, default=DEFAULT_PAIRS)
    parser.add_argument("--errors", action="store_true", help="list the pairs the rules get wrong")
    args = parser.parse_args(argv)
    overall, by_category = evaluate(load_pairs(args.pairs))
    print(format_table(overall, by_category))
    if args.errors:
        for pair, decision in overall.errors:
            print(
                f"\n[{pair.label}, rules: {decision.verdict}] {pair.note}\n  old: {pair.old}\n  new: {pair.new}"
                f"\n  why: {decision.reason}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
