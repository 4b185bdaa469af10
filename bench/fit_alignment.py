"""Does a token-level alignment of the query with its best memories tell "answers it" from "on
the same topic"?  Measured held out, the way bench/fit_relevance.py measures relevance.

    python bench/retrieval.py --keep /tmp/locomo-db      # once: the LoCoMo store
    python bench/relevance.py --no-locomo --keep /tmp/facts-db   # once: the fact store
    python bench/fit_alignment.py --db /tmp/locomo-db --facts /tmp/facts-db [--data PATH]

The local model computes a contextual vector for every token before it pools them into the
sentence's vector.  For a query and one memory, each content word of the query (special tokens,
punctuation and general English function words left out; a word split into pieces is the mean
of its pieces) is matched to the closest word of the memory (BERTScore's recall): ``align_min``
is the worst of those best cosines, ``align_mean`` their mean, ``align_idf`` their mean weighted by
each word's inverse document frequency among the scope's memories (``--layers N`` reads the word
vectors after the model's first N layers instead of the last).  The intuition: in "blood type"
against "blood pressure medication", "type" finds no counterpart; in a paraphrase, every word of
the question finds a related word in the answer.

Two ways to use it are scored, each against relevance as shipped, with the same folds as
fit_relevance.py (one persona and one LoCoMo conversation held out; the model fitted and the
thresholds chosen on the rest):

- *feature*: the alignment of the search's first TOP candidates (the best ``align_mean`` and the
  best ``align_min`` among them) as two more columns of relevance's query model;
- *check*: memory.context's choice as shipped, then nothing injected unless the best
  ``align_mean`` (or ``align_min``) among the memories chosen reaches a bar, chosen in each fold
  on the fitted personas (the largest gain of fact in context minus unanswerable injected).

It prints the held-out context trade-off (fact in context / unanswerable injected / unrelated
injected) of each at the same thresholds, the AUC of each alignment figure alone for "something
stored answers it", and what computing it costs per context call (one forward pass of the query
and the first TOP memories).  Nothing here reads a name, word or question of either set.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import safetensors.numpy

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fact_set  # noqa: E402
import fit_relevance as fr  # noqa: E402
import locomo  # noqa: E402
from retrieval import default_data  # noqa: E402

from memoryd.embed.bert import BertConfig, BertWeights  # noqa: E402
from memoryd.embed.local import BUNDLED_SHA256, bundled_model_path  # noqa: E402
from memoryd.embed.onnx_bert import OrtBertEncoder, import_onnxruntime  # noqa: E402
from memoryd.embed.query_form import embedded_form  # noqa: E402
from memoryd.embed.sentence_model import SentenceModel  # noqa: E402
from memoryd.store import answer_kind, relevance  # noqa: E402

#: The columns of an alignment: the worst and the mean best cosine of the query's content words.
MIN, MEAN, IDF = 0, 1, 2
#: The columns added to the query model (the best of each among the first TOP candidates).
FEATURES = (MEAN, MIN)
#: How many of the search's first candidates are aligned with the query.
TOP = 3
#: With ``--standout``: how many candidates after the first TOP the best alignment is measured against.
RUNNERS = 5
#: General English function words (and the question words around them): what a question is
#: made of whatever it asks.  Nothing of either set.
FUNCTION_WORDS = frozenset(
    "a an the and or but if of to in on at by for with from about as into onto over under up down out off "
    "is am are was were be been being do does did done have has had having will would shall should can could "
    "may might must i me my mine myself we us our ours you your yours he him his she her hers it its they them "
    "their theirs this that these those there here what which who whom whose when where why how "
    "not no yes so than then too very just also any some all each every much many more most "
    "s t d ll re ve m get got go going went ever still yet again".split()
)
_WORDLIKE = re.compile(r"\w", re.UNICODE)

Words = tuple[list[str], np.ndarray]  # each word, and its unit vector (rows)


def truncated(layers: int) -> OrtBertEncoder:
    """The local model's encoder cut after its first ``layers`` layers (BERTScore reads a middle
    layer: the last one is shaped for pooling into the sentence's vector)."""
    folder = bundled_model_path()
    config = BertConfig.from_json(json.loads((folder / "config.json").read_text()))
    weights = BertWeights(config, safetensors.numpy.load((folder / "model.safetensors").read_bytes()))
    weights.layers = weights.layers[:layers]
    return OrtBertEncoder(import_onnxruntime(), weights, threads=1)


class Aligner:
    """Word vectors of texts from the local model's last layer, cached by text."""

    def __init__(self, model: SentenceModel, encoder: OrtBertEncoder) -> None:
        self.model = model
        self.encoder = encoder
        self.cache: dict[str, Words] = {}

    def words(self, texts: list[str]) -> list[Words]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        for start in range(0, len(missing), 32):
            chunk = missing[start : start + 32]
            for text, value in zip(chunk, word_vectors(self.model, chunk, self.encoder), strict=True):
                self.cache[text] = value
        return [self.cache[t] for t in texts]


def word_vectors(model: SentenceModel, texts: list[str], encoder: OrtBertEncoder) -> list[Words]:
    """Each text's words (lowercased, pieces joined) and their unit contextual vectors."""
    prepared = [t.strip().lower() if model.lowercase_input else t.strip() for t in texts]
    encodings = model.tokenizer.encode_batch(prepared, add_special_tokens=True)
    longest = max(len(e.ids) for e in encodings)
    batch = np.zeros((len(encodings), longest), dtype=np.int64)
    mask = np.zeros((len(encodings), longest), dtype=bool)
    for row, e in enumerate(encodings):
        batch[row, : len(e.ids)] = e.ids
        mask[row, : len(e.ids)] = True
    hidden = encoder.forward(batch, None if mask.all() else mask)
    out: list[Words] = []
    for row, (text, e) in enumerate(zip(prepared, encodings, strict=True)):
        groups: dict[int, list[int]] = {}
        for position, word in enumerate(e.word_ids):
            if word is not None and e.special_tokens_mask[position] == 0:
                groups.setdefault(word, []).append(position)
        names, vectors = [], []
        for positions in groups.values():
            start, end = e.offsets[positions[0]][0], e.offsets[positions[-1]][1]
            names.append(text[start:end].lower())
            vectors.append(hidden[row, positions].mean(axis=0))
        matrix = np.array(vectors, dtype=np.float64).reshape(len(vectors), -1)
        if len(matrix):
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        out.append((names, matrix))
    return out


def content(words: Words) -> np.ndarray:
    names, matrix = words
    keep = [i for i, name in enumerate(names) if _WORDLIKE.search(name) and name not in FUNCTION_WORDS]
    return matrix[keep]


def alignment(query: Words, memory: Words, idf: Callable[[str], float] | None = None) -> tuple[float, float, float]:
    """(min, mean, IDF-weighted mean) over the query's content words of the best cosine with a
    memory's word."""
    names = [n for n in query[0] if _WORDLIKE.search(n) and n not in FUNCTION_WORDS]
    q = content(query)
    m = content(memory)
    if not len(m):
        m = memory[1]
    if not len(q) or not len(m):
        return 0.0, 0.0, 0.0
    best = (q @ m.T).max(axis=1)
    weights = np.array([idf(n) for n in names]) if idf is not None else np.ones(len(names))
    return float(best.min()), float(best.mean()), float(best @ weights / weights.sum())


class Aligned:
    """Alignment of one question's candidates, computed as needed."""

    def __init__(self, c: fr.Candidates, aligner: Aligner, idf: Callable[[str], float]) -> None:
        self.c = c
        self.aligner = aligner
        self.idf = idf
        self.values: dict[int, tuple[float, float, float]] = {}

    def of(self, indices: list[int]) -> list[tuple[float, float, float]]:
        todo = [i for i in indices if i not in self.values]
        if todo:
            query, *memories = self.aligner.words([embedded_form(self.c.text)] + [self.c.contents[i] for i in todo])
            for i, memory in zip(todo, memories, strict=True):
                self.values[i] = alignment(query, memory, self.idf)
        return [self.values[i] for i in indices]

    def top_features(self, standout: bool = False) -> np.ndarray:
        """The best of each FEATURES column among the first TOP candidates; with ``standout``,
        less its mean over the next RUNNERS (as relevance's standout reads the cosine)."""
        pairs = self.of(self.c.order[:TOP])
        best = np.array([max(p[column] for p in pairs) for column in FEATURES])
        runners = self.of(self.c.order[TOP : TOP + RUNNERS])
        if not standout or not runners:
            return best
        less: np.ndarray = best - np.array([np.mean([p[column] for p in runners]) for column in FEATURES])
        return less


# --- the query model with two more columns -------------------------------------------------


def fit_with(sets: list[fr.Candidates], extra: dict[int, np.ndarray]) -> tuple[relevance.Weights, np.ndarray]:
    """relevance's three models as fit_relevance.fit fits them, and a query model whose
    columns are relevance's plus ``extra`` (per question)."""
    base = fr.fit(sets, adapter=False)
    rows = [(c, relevance.memory_features(c.matrix[c.has_vector])) for c in sets if c.has_vector.any()]
    x = np.array([np.concatenate([relevance.query_features(m), extra[id(c)]]) for c, m in rows])
    y = np.array([1.0 if c.answerable else 0.0 for c, _ in rows])
    w = np.array([fr.QUESTION_WEIGHT if c.question is not None else 1.0 for c, _ in rows])
    return base, fr._fit(x, y, w)


def predict_with(c: fr.Candidates, base: relevance.Weights, query: np.ndarray, extra: np.ndarray) -> np.ndarray:
    if not c.has_vector.all():
        return fr.predict(c, base)
    _, memory, _ = base.arrays
    x = relevance.memory_features(c.matrix)
    q = np.concatenate([relevance.query_features(x), extra])
    answered = 1.0 / (1.0 + np.exp(-(q @ query[:-1] + query[-1])))
    out: np.ndarray = answered / (1.0 + np.exp(-(x @ memory[:-1] + memory[-1])))
    return out


# --- the separate check ---------------------------------------------------------------------

Check = Callable[[fr.Candidates, list[int]], bool]


def figures(
    sets: list[fr.Candidates], ps: list[np.ndarray], threshold: float, check: Check | None
) -> tuple[float, ...]:
    """(fact in context, unanswerable injected, unrelated injected) at ``threshold``."""
    hit, unanswerable, unrelated = [], [], []
    for c, p in zip(sets, ps, strict=True):
        chosen = fr.context_shown(c, p, threshold)
        if chosen and check is not None and not check(c, chosen):
            chosen = []
        if c.answerable:
            hit.append(int(np.argmax(c.label)) in chosen)
        elif c.unrelated:
            unrelated.append(bool(chosen))
        else:
            unanswerable.append(bool(chosen))
    return float(np.mean(hit)), float(np.mean(unanswerable)), float(np.mean(unrelated))


def bar_check(aligned: dict[int, Aligned], column: int, bar: float) -> Check:
    def check(c: fr.Candidates, chosen: list[int]) -> bool:
        return max(v[column] for v in aligned[id(c)].of(chosen[:TOP])) >= bar  # (min, mean, ...)

    return check


def idf_of(texts: list[str]) -> Callable[[str], float]:
    """A word's inverse document frequency among a scope's memories (each text once)."""
    unique = set(texts)
    df: dict[str, int] = {}
    for text in unique:
        for word in set(re.findall(r"\w+", text.lower())):
            df[word] = df.get(word, 0) + 1
    n = len(unique)
    return lambda word: float(np.log((n + 1) / (df.get(word, 0) + 0.5)))


def auc(scores: list[float], labels: list[bool]) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, required=True, help="a directory written by retrieval.py --keep")
    parser.add_argument("--facts", type=Path, required=True, help="a directory written by relevance.py --keep")
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument("--show", action="store_true", help="print the hard cases nothing answers")
    parser.add_argument("--standout", action="store_true", help="the query features less the next candidates' mean")
    parser.add_argument("--layers", type=int, default=0, help="word vectors from this many layers (0: all)")
    args = parser.parse_args()
    conversations = locomo.load(args.data)
    model = SentenceModel(bundled_model_path(), expected_sha256=BUNDLED_SHA256)
    aligner = Aligner(model, truncated(args.layers) if args.layers else model.encoder)
    try:
        facts = [c for c in fr.collect_facts(args.facts, model) if c.group != fact_set.PARAPHRASE_NAME]
        talks = fr.collect_locomo(args.db, conversations, model)
        idfs = {group: idf_of([t for c in facts + talks if c.group == group for t in c.contents])
                for group in {c.group for c in facts + talks}}  # fmt: skip
        aligned = {id(c): Aligned(c, aligner, idfs[c.group]) for c in facts + talks}
        started = time.perf_counter()
        extra = {id(c): aligned[id(c)].top_features(args.standout) for c in facts + talks}
        print(f"alignment of {len(extra)} questions' first {TOP} candidates: {time.perf_counter() - started:.1f} s")
        # Cost per context call: one forward pass of the query and its first TOP memories.
        costs = []
        for c in facts[:: max(1, len(facts) // 60)]:
            texts = [embedded_form(c.text)] + [c.contents[i] for i in c.order[:TOP]]
            started = time.perf_counter()
            query, *memories = word_vectors(model, texts, aligner.encoder)
            _ = [alignment(query, m) for m in memories]
            costs.append((time.perf_counter() - started) * 1000)
        print(f"cost per context call (query + {TOP} memories, one pass): median {statistics.median(costs):.1f} ms, "
              f"p90 {np.percentile(costs, 90):.1f} ms over {len(costs)} calls")  # fmt: skip
        # Alone: does it tell answerable questions from unanswerable personal ones?
        personal = [c for c in facts if not c.unrelated]
        labels = [c.answerable for c in personal]
        best_cos = [float(c.matrix[c.has_vector, 0].max()) for c in personal]
        print(f"AUC answerable vs unanswerable personal questions: best cosine {auc(best_cos, labels):.3f}, "
              f"top-{TOP} align_mean {auc([extra[id(c)][0] for c in personal], labels):.3f}, "
              f"top-{TOP} align_min {auc([extra[id(c)][1] for c in personal], labels):.3f}, "
              f"first candidate align_mean {auc([aligned[id(c)].of(c.order[:1])[0][1] for c in personal], labels):.3f}")  # fmt: skip
        personas = list(dict.fromkeys(c.group for c in facts))
        users = list(dict.fromkeys(c.group for c in talks))
        held: dict[str, dict[int, np.ndarray]] = {"base": {}, "feature": {}}
        bars: dict[int, list[float]] = {MEAN: [], MIN: [], IDF: []}
        held_bars: dict[int, dict[str, float]] = {MEAN: {}, MIN: {}, IDF: {}}
        contexts, feature_contexts = [], []
        for fold, persona in enumerate(personas):
            user = users[fold % len(users)]
            train = [c for c in facts if c.group != persona] + [c for c in talks if c.group != user]
            fitted = [c for c in facts if c.group != persona]
            mine = [c for c in facts if c.group == persona]
            base = fr.fit(train, adapter=False)
            fitted_p = [fr.predict(c, base) for c in fitted]
            context = fr.choose_context(fitted, fitted_p)
            contexts.append(context)
            for c in mine:
                held["base"][id(c)] = fr.predict(c, base)
            weights, query_model = fit_with(train, extra)
            print(f"fold {persona}: query weights with alignment {np.round(query_model, 2).tolist()}")
            for c in mine:
                held["feature"][id(c)] = predict_with(c, weights, query_model, extra[id(c)])
            feature_contexts.append(
                fr.choose_context(fitted, [predict_with(c, weights, query_model, extra[id(c)]) for c in fitted])
            )
            # The check's bar, chosen on the fitted personas at the fold's context threshold.
            for column in (MEAN, MIN, IDF):
                grid = np.round(np.arange(0.0, 0.95, 0.025), 3).tolist()

                gains = [figures(fitted, fitted_p, context, bar_check(aligned, column, b)) for b in grid]
                bar = max(zip(grid, gains, strict=True), key=lambda g: (g[1][0] - g[1][1], -g[0]))[0]
                bars[column].append(bar)
                held_bars[column][persona] = bar
            print(
                f"fold {persona}: context {context}, check bars align_mean {bars[MEAN][-1]}, align_min {bars[MIN][-1]}, align_idf {bars[IDF][-1]}"
            )
    finally:
        model.close()
    base_p = [held["base"][id(c)] for c in facts]
    feature_p = [held["feature"][id(c)] for c in facts]

    # Each persona at the threshold its own fold chose on the fitted personas (for each model).
    for name, ps, thresholds in (
        ("shipped", base_p, contexts),
        ("alignment as query features", feature_p, feature_contexts),
    ):
        at = dict(zip(personas, thresholds, strict=True))
        rows = [figures([c], [p], at[c.group], None) for c, p in zip(facts, ps, strict=True)]
        shares = [np.mean([r[k] for r, c in zip(rows, facts, strict=True) if kind(c)]) for k, kind in
             ((0, lambda c: c.answerable), (1, lambda c: not c.answerable and not c.unrelated), (2, lambda c: c.unrelated))]  # fmt: skip
        print(
            f"held out at each fold's own threshold ({thresholds}), {name}: " + " / ".join(f"{v:.3f}" for v in shares)
        )

    def folded(column: int) -> Check:
        def check(c: fr.Candidates, chosen: list[int]) -> bool:
            return bar_check(aligned, column, held_bars[column][c.group])(c, chosen)

        return check

    # The hard cases: questions whose context (shipped, 0.25) injects something.  Is the right
    # fact among them (answerable) or nothing answers (unanswerable personal)?
    hard = [(c, fr.context_shown(c, p, 0.25)) for c, p in zip(facts, base_p, strict=True) if not c.unrelated]
    hard = [(c, chosen) for c, chosen in hard if chosen]
    good = [c.answerable and int(np.argmax(c.label)) in chosen for c, chosen in hard]
    for column, name in ((MIN, "align_min"), (MEAN, "align_mean"), (IDF, "align_idf")):
        best = [max(v[column] for v in aligned[id(c)].of(chosen[:TOP])) for c, chosen in hard]
        first = [aligned[id(c)].of(chosen[:1])[0][column] for c, chosen in hard]
        print(f"hard cases ({sum(good)} right, {len(good) - sum(good)} not): AUC of {name} of the chosen: "
              f"best of {TOP} {auc(best, good):.3f}, first {auc(first, good):.3f}")  # fmt: skip
    if args.show:
        for (c, chosen), right in zip(hard, good, strict=True):
            if not right:
                print(f"  not answered: {c.text!r} -> {c.contents[chosen[0]]!r}: {aligned[id(c)].of(chosen[:1])[0]}")
        values = np.array([aligned[id(c)].of(chosen[:1])[0] for (c, chosen), r in zip(hard, good, strict=True) if r])
        print(
            f"  answered (first chosen), quartiles of (min, mean, idf): {np.percentile(values, [25, 50, 75], axis=0).round(3).tolist()}"
        )
    cos = [float(c.matrix[chosen[0], 0]) for c, chosen in hard]
    print(f"  for comparison, the first chosen's cosine: {auc(cos, good):.3f}")

    print("\nheld out, context trade-off (fact in context / unanswerable injected / unrelated injected):")
    print(
        "| threshold | shipped | alignment as query features | check align_mean (fold bars) | check align_min (fold bars) | check align_idf (fold bars) |"
    )
    print("|---|---|---|---|---|---|")
    for t in fr.CONTEXT_GRID:
        rows = [
            figures(facts, base_p, t, None),
            figures(facts, feature_p, t, None),
            figures(facts, base_p, t, folded(MEAN)),
            figures(facts, base_p, t, folded(MIN)),
            figures(facts, base_p, t, folded(IDF)),
        ]
        print(f"| {t:.2f} | " + " | ".join(" / ".join(f"{v:.3f}" for v in r) for r in rows) + " |")
    print(
        f"\nfold context thresholds {contexts}; check bars align_mean {bars[MEAN]}, align_min {bars[MIN]}, align_idf {bars[IDF]}"
    )
    # The check at fixed bars, every fold's threshold as shipped (0.25), for the curve's shape.
    print("\ncheck at fixed bars, threshold 0.25 (fact / unanswerable / unrelated):")
    for column, name in ((MEAN, "align_mean"), (MIN, "align_min"), (IDF, "align_idf")):
        for bar in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
            f = figures(facts, base_p, 0.25, bar_check(aligned, column, bar))
            print(f"  {name} >= {bar}: " + " / ".join(f"{v:.3f}" for v in f))
    _ = answer_kind  # the shipped check runs inside fr.context_shown


if __name__ == "__main__":
    main()
