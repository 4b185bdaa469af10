"""The LoCoMo retrieval task of ../shared/eval/README.md: turns to add, questions, and the metrics.

Pure data handling (no daemon, no store), so the socket run and the in-process comparison rows
score their rankings with the same code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Categories 1-4 are queried; 5 (adversarial) is left out.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10, 20)
LIMIT = 20
#: Upstream labels are sometimes malformed (``D:11:26``, ``D30:05``, ``D8:6; D9:17``).
_LABEL = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class Turn:
    label: str  # the normalised dia_id, e.g. "D3:14"
    content: str  # what memory.add stores: "[when] speaker: text"
    speaker: str = ""
    text: str = ""  # the message as said (with its image caption), what memory.observe sends
    when: str = ""  # the session's date as LoCoMo writes it ("1:56 pm on 8 May, 2023")
    session: int = 0


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    user_id: str
    turns: list[Turn]
    questions: list[Question]


def labels_in(text: str) -> list[str]:
    return [f"D{int(s)}:{int(t)}" for s, t in _LABEL.findall(text)]


def session_of(label: str) -> str:
    return label.split(":", 1)[0]


def load(path: Path) -> list[Conversation]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [_conversation(sample) for sample in data]


def _conversation(sample: dict[str, object]) -> Conversation:
    talk = sample["conversation"]
    assert isinstance(talk, dict)
    sessions = sorted(
        (int(key.split("_")[1]) for key in talk if re.fullmatch(r"session_\d+", key)),
    )
    turns: list[Turn] = []
    for number in sessions:
        when = talk[f"session_{number}_date_time"]
        for turn in talk[f"session_{number}"]:
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" (image: {turn['blip_caption']})"
            content = f"[{when}] {turn['speaker']}: {text}"
            (label,) = labels_in(turn["dia_id"])
            turns.append(Turn(label, content, turn["speaker"], text, when, number))
    qa = sample["qa"]
    assert isinstance(qa, list)
    questions = [
        Question(item["question"], int(item["category"]), frozenset(labels_in(" ".join(map(str, item["evidence"])))))
        for item in qa
        if int(item["category"]) in CATEGORIES
    ]
    return Conversation(str(sample["sample_id"]), turns, questions)


@dataclass
class Scores:
    """Per-question metrics, averaged by :meth:`summary`."""

    rows: list[tuple[int, dict[str, float]]] = field(default_factory=list)

    def add(self, question: Question, ranked: Sequence[Iterable[str]]) -> None:
        """``ranked``: for each hit, best first, the labels it carries (a deduplicated add
        carries several)."""
        hits = [set(labels) for labels in ranked[:LIMIT]]
        evidence = question.evidence
        sessions = {session_of(label) for label in evidence}
        row: dict[str, float] = {}
        for k in KS:
            found = set().union(*hits[:k]) & evidence
            row[f"recall@{k}"] = len(found) / len(evidence) if evidence else 0.0
        row["session_any@10"] = float(any(session_of(label) in sessions for hit in hits[:10] for label in hit))
        row["mrr"] = next((1.0 / rank for rank, hit in enumerate(hits, start=1) if hit & evidence), 0.0)
        self.rows.append((question.category, row))

    def summary(self, category: int | None = None) -> dict[str, float]:
        rows = [row for cat, row in self.rows if category is None or cat == category]
        if not rows:
            return {}
        return {name: sum(row[name] for row in rows) / len(rows) for name in rows[0]} | {"n": float(len(rows))}


COLUMNS = ("recall@1", "recall@5", "recall@10", "recall@20", "session_any@10", "mrr")


def table(results: dict[str, Scores]) -> str:
    """Markdown: one block per slice (overall, then each category), one row per retriever."""
    lines: list[str] = []
    for category in (None, *CATEGORIES):
        title = "overall" if category is None else f"category {category} ({CATEGORIES[category]})"
        first = next(iter(results.values())).summary(category)
        lines.append(f"\n{title}, {int(first.get('n', 0))} questions\n")
        lines.append("| retriever | " + " | ".join(COLUMNS) + " |")
        lines.append("|---|" + "---|" * len(COLUMNS))
        for name, scores in results.items():
            summary = scores.summary(category)
            lines.append(f"| {name} | " + " | ".join(f"{summary.get(c, 0.0):.3f}" for c in COLUMNS) + " |")
    return "\n".join(lines)
