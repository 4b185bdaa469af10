"""The fact-style relevance set of bench/data/relevance/: personas, their facts, and questions.

Each ``*.txt`` file is one persona (one user): ``[facts]`` lines ``key: first-person fact``,
``[questions]`` lines ``key: question`` (a paraphrase answered by that one fact, sharing few of
its words), ``[unanswerable]`` lines holding a personal question nothing the persona stored
answers, ``[unrelated]`` lines holding a message that is not about the persona at all (general
knowledge, a task), which no memory should answer.  A
``#`` line is a comment (each file says the writing style it keeps, so that scoring on a held-out
persona also scores an unseen style).  Pure data handling: no daemon, no store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "relevance"


@dataclass(frozen=True)
class Persona:
    name: str  # the file's stem, also the persona's user id
    facts: dict[str, str]  # key -> text
    questions: list[tuple[str, str]]  # (key of the answering fact, question)
    unanswerable: list[str]
    unrelated: list[str]


def load(folder: Path = DATA) -> list[Persona]:
    return [parse(path.stem, path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.txt"))]


def parse(name: str, text: str) -> Persona:
    sections: dict[str, list[str]] = {"facts": [], "questions": [], "unanswerable": [], "unrelated": []}
    current: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections[line[1:-1]]
            continue
        if current is None:
            raise ValueError(f"{name}: a line before any section: {line!r}")
        current.append(line)
    facts = dict(_keyed(name, line) for line in sections["facts"])
    questions = [_keyed(name, line) for line in sections["questions"]]
    for key, _ in questions:
        if key not in facts:
            raise ValueError(f"{name}: question for an unknown fact {key!r}")
    return Persona(name, facts, questions, sections["unanswerable"], sections["unrelated"])


def _keyed(name: str, line: str) -> tuple[str, str]:
    key, sep, text = line.partition(":")
    if not sep or not text.strip():
        raise ValueError(f"{name}: expected 'key: text', got {line!r}")
    return key.strip(), text.strip()


#: A second set of answerable questions, kept by the tests (tests/data/paraphrase.json): 27
#: questions each answered by one of 60 memories, worded unlike their facts.
PARAPHRASE = Path(__file__).resolve().parents[1] / "tests" / "data" / "paraphrase.json"
PARAPHRASE_NAME = "paraphrase"


def paraphrase(path: Path = PARAPHRASE) -> Persona:
    """The tests' paraphrase set as one more persona, its facts and distractors interleaved as
    the test adds them; it has no unanswerable or unrelated questions."""
    data = json.loads(path.read_text(encoding="utf-8"))
    facts = [item["fact"] for item in data["questions"]]
    distractors = data["distractors"]
    memories: dict[str, str] = {}
    for i in range(max(len(facts), len(distractors))):
        if i < len(facts):
            memories[f"fact{i}"] = facts[i]
        if i < len(distractors):
            memories[f"other{i}"] = distractors[i]
    questions = [(f"fact{i}", item["question"]) for i, item in enumerate(data["questions"])]
    return Persona(PARAPHRASE_NAME, memories, questions, [], [])
