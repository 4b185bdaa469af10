"""The query side of the local model fine-tuned: does a learned query encoder tell "answers it"
from "on the same topic" better than the linear query adapter?

    /tmp/ce-venv/bin/python bench/fit_query_encoder.py [--trained 6] [--epochs 8] [--lr 2e-5]
    /tmp/ce-venv/bin/python bench/fit_query_encoder.py --trained 2 --epochs 8 --lr 3e-5

Run as bench/fit_cross_encoder.py is (torch and transformers in an environment of their own; its
module docstring says how to make one).  Memories keep the vectors the local model gives them, as
stored; only the query is encoded by a copy of the model whose top ``--trained`` layers are
fine-tuned (AdamW), so a store would need nothing re-embedded, only a second forward pass per
query.  The loss is the query adapter's (bench/fit_adapter.py) per persona, every memory a
candidate of each of its questions: a logistic loss on a fitted scale times the cosine plus a
bias for every memory (the answering fact 1, the others 0), weighted 5; the softmax over the
memories with the answering fact as its target; the answering fact's own logistic term; and for
a question nothing answers, the logistic loss of a soft maximum of its cosines, weighted 2.  The
training personas of bench/data/relevance_train/ are fitted but every sixth, held out for
validation (training-style: every unanswerable question asks about the topic of a stored fact).

After each epoch, on the validation personas and the six personas of bench/data/relevance/ (never
seen): the AUC of the best cosine, answerable against unanswerable personal questions, and top-1
over every memory of the persona (the plain model's figures first).  Nothing here reads a name,
word or question of either set.
"""

from __future__ import annotations

import argparse
import copy
import random
import time
from dataclasses import dataclass
from pathlib import Path

import fit_cross_encoder as fce
import numpy as np
import torch
from fit_cross_encoder import fact_set

#: The losses' weights and sharpness, as bench/fit_adapter.py's.
EACH_MEMORY, UNANSWERED, RANK_TEMPERATURE, MAX_SHARPNESS = 5.0, 2.0, 20.0, 50.0


@dataclass
class Asked:
    """One persona: its memories' vectors (the plain model's) and its questions' embedded forms."""

    memories: torch.Tensor
    questions: list[str]
    answers: torch.Tensor  # the answering memory, -1 nothing answers (personal), -2 unrelated


def personas(encoder: fce.Encoder, chosen: list[fact_set.Persona]) -> list[Asked]:
    out = []
    for persona in chosen:
        keys = list(persona.facts)
        memories = torch.tensor(encoder.vectors([persona.facts[k] for k in keys]), dtype=torch.float32)
        asked = [(text, keys.index(key)) for key, text in persona.questions]
        asked += [(text, -1) for text in persona.unanswerable] + [(text, -2) for text in persona.unrelated]
        questions = [fce.ce.query_form.embedded_form(text) for text, _ in asked]
        out.append(Asked(memories, questions, torch.tensor([answer for _, answer in asked])))
    return out


def pooled(encoder: fce.Encoder, model: torch.nn.Module, texts: list[str]) -> torch.Tensor:
    batch = encoder.tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)


def loss_of(asked: Asked, queries: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    logistic = torch.nn.functional.binary_cross_entropy_with_logits
    cosines = queries @ asked.memories.T
    answerable = asked.answers >= 0
    target = torch.zeros_like(cosines)
    target[answerable, asked.answers[answerable]] = 1.0
    loss = EACH_MEMORY * logistic(scale * cosines + bias, target)
    if answerable.any():
        right = cosines[answerable, asked.answers[answerable]]
        loss = loss + torch.nn.functional.cross_entropy(
            RANK_TEMPERATURE * cosines[answerable], asked.answers[answerable]
        )
        loss = loss + logistic(scale * right + bias, torch.ones_like(right))
    if (~answerable).any():
        soft = torch.logsumexp(MAX_SHARPNESS * cosines[~answerable], dim=1) / MAX_SHARPNESS
        loss = loss + UNANSWERED * logistic(scale * soft + bias, torch.zeros_like(soft))
    return loss


@torch.no_grad()
def figures(encoder: fce.Encoder, model: torch.nn.Module, sets: list[Asked]) -> str:
    yes, no, right = [], [], []
    for asked in sets:
        cosines = pooled(encoder, model, asked.questions) @ asked.memories.T
        for row, answer in zip(cosines, asked.answers.tolist(), strict=True):
            if answer >= 0:
                yes.append(float(row.max()))
                right.append(int(row.argmax()) == answer)
            elif answer == -1:
                no.append(float(row.max()))
    return f"AUC {fce.auc(np.array(yes), np.array(no)):.3f}, top-1 {np.mean(right):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="the local model's folder (default: the installed package's)")
    parser.add_argument("--train", type=Path, default=fce.TRAIN, help="the training personas' folder")
    parser.add_argument("--trained", type=int, default=6, help="top layers fine-tuned (1-6)")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-5, help="AdamW's learning rate for the layers")
    parser.add_argument("--threads", type=int, default=2, help="torch's threads")
    args = parser.parse_args()
    torch.manual_seed(0)
    random.seed(0)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    encoder = fce.Encoder(args.model or fce.default_model(), frozen=0)
    layers = encoder.bert.encoder.layer
    if not 1 <= args.trained <= len(layers):
        parser.error(f"--trained must be 1-{len(layers)}")
    query_model = copy.deepcopy(encoder.bert)
    for parameter in query_model.parameters():
        parameter.requires_grad = False
    tuned = [p for layer in query_model.encoder.layer[len(layers) - args.trained :] for p in layer.parameters()]
    for parameter in tuned:
        parameter.requires_grad = True
    training = fact_set.load(args.train)
    held = {p.name for p in training[:: fce.VALIDATION_EVERY]}
    fitted = personas(encoder, [p for p in training if p.name not in held])
    validation = personas(encoder, [p for p in training if p.name in held])
    dev = personas(encoder, fact_set.load())
    print(
        f"{len(fitted)} training personas, {len(validation)} for validation, the fact set; top {args.trained} layers "
        f"fine-tuned; prepared in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    print(
        f"plain model: validation {figures(encoder, encoder.bert, validation)}; fact set {figures(encoder, encoder.bert, dev)}"
    )
    scale, bias = torch.nn.Parameter(torch.tensor(20.0)), torch.nn.Parameter(torch.tensor(-8.0))
    optimiser = torch.optim.AdamW(
        [{"params": tuned, "lr": args.lr}, {"params": [scale, bias], "lr": 1e-2}], weight_decay=0.01
    )
    for epoch in range(1, args.epochs + 1):
        query_model.train()
        begun, total = time.perf_counter(), 0.0
        random.shuffle(fitted)
        for asked in fitted:
            loss = loss_of(asked, pooled(encoder, query_model, asked.questions), scale, bias)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += loss.item()
        query_model.eval()
        print(
            f"epoch {epoch}: loss {total / len(fitted):.3f} ({time.perf_counter() - begun:.0f} s); "
            f"validation {figures(encoder, query_model, validation)}; fact set {figures(encoder, query_model, dev)}",
            flush=True,
        )
    print(f"{sum(p.numel() for p in tuned)} parameters fine-tuned; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
