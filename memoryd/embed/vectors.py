"""Checks and normalization shared by every backend: what leaves memoryd.embed is float32,
finite and unit-length, or an EmbedderError."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memoryd.errors import EmbedderError

F32 = npt.NDArray[np.float32]


def normalize_rows(vectors: F32) -> F32:
    """Scales each row to unit L2 norm in place; returns the array."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # sentence-transformers' Normalize clamps the norm the same way.
    np.maximum(norms, np.float32(1e-12), out=norms)
    vectors /= norms
    return vectors


def text_batch(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, refusing anything that is not a str (every backend's first check)."""
    batch = list(texts)
    if not all(isinstance(text, str) for text in batch):
        raise TypeError("embed() takes a sequence of str")
    return batch


def empty(dim: int | None) -> F32:
    return np.empty((0, dim or 0), dtype=np.float32)


def checked_unit_rows(rows: list[list[float]], *, expected_rows: int, dim: int | None, source: str) -> F32:
    """Validates a backend reply's vectors (already decoded as lists of floats) and returns them
    L2-normalized.  ``dim`` None accepts any width, the same for every row.

    Raises EmbedderError naming what was wrong: count, dimension, NaN/inf, all-zero rows.
    """
    if len(rows) != expected_rows:
        raise EmbedderError(f"{source}: got {len(rows)} embeddings for {expected_rows} inputs")
    widths = {len(row) for row in rows}
    if len(widths) > 1:
        raise EmbedderError(f"{source}: embeddings of different dimensions {sorted(widths)} in one reply")
    width = widths.pop() if widths else (dim or 0)
    if width == 0 and expected_rows:
        raise EmbedderError(f"{source}: empty embedding vectors")
    if dim is not None and width != dim:
        raise EmbedderError(f"{source}: embedding dimension {width}, expected {dim}")
    with np.errstate(over="ignore"):  # beyond float32 range becomes inf, refused below
        vectors = np.array(rows, dtype=np.float32).reshape(expected_rows, width)
    if not np.isfinite(vectors).all():
        raise EmbedderError(f"{source}: embeddings contain NaN or infinite values")
    # float64 norms: squares of large float32 values would overflow.
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    if (norms == 0).any():
        raise EmbedderError(f"{source}: an embedding is all zeros")
    unit: F32 = (vectors / norms[:, None]).astype(np.float32)
    return unit
