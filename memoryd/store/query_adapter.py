"""The learned query adapter: the query's vector moved before a second cosine, for relevance.

``q' = normalize(q + M q)``, with ``M`` in ``data/query_adapter.npz`` (float32: either ``u`` and
``v``, 384 x r, for ``M = U V^T``, or ``full``, 384 x 384, as bench/fit_adapter.py --save wrote it), fitted by bench/fit_adapter.py on bench/data/relevance_train/ to tell
"answers it" from "on the same topic" (docs/design/relevance.md, "A learned query adapter").
Stored vectors stay as they are: each candidate's *adapted cosine* is its stored vector's cosine
with ``q'``, read by the engines beside the plain one, and relevance.py reads it as one more
feature.  It never orders anything: the search's order is the ranking model's, on the plain cosine.

The map was fitted on the local model's vectors, so it applies to them only (the space
``local:all-MiniLM-L6-v2``, 384 dimensions); any other space gets ``None`` from :func:`adapted`
and relevance runs on its fallback weights, without the adapted columns.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
from pathlib import Path

import numpy as np
import numpy.typing as npt

log = logging.getLogger("memoryd.store")

#: The vector space the adapter was fitted in (memoryd.embed.local's bundled model id).
MODEL_ID = "local:all-MiniLM-L6-v2"
DIM = 384
PATH = Path(__file__).resolve().parent / "data" / "query_adapter.npz"
#: The shipped file's digest: a different file (a broken install) is not read.
SHA256 = "60549ffc8cfb88cda56a40e7fa115982f4c5529514eee5f8e6dc884af2f2bf03"

Matrix = npt.NDArray[np.float32]


def applies(model: str, dim: int) -> bool:
    """Whether a store's vector space is the one the adapter was fitted in."""
    return model == MODEL_ID and dim == DIM


@functools.cache
def matrix(path: Path = PATH, sha256: str = SHA256) -> Matrix | None:
    """``M`` (384 x 384), read once; None (and a warning) when the file is missing, is not the
    shipped one, or holds matrices of the wrong shape: relevance then runs without the adapter."""
    try:
        data = path.read_bytes()
    except OSError as error:
        log.warning("query adapter: cannot read %s (%s); relevance runs without it", path, error.strerror)
        return None
    if hashlib.sha256(data).hexdigest() != sha256:
        log.warning("query adapter: %s is not the shipped file (sha256 differs); relevance runs without it", path)
        return None
    # The bytes just checked are the ones read: the file is not opened a second time.
    with np.load(io.BytesIO(data)) as npz:
        names = ["full"] if "full" in npz.files else ["u", "v"]
        parts = [np.asarray(npz[name], dtype=np.float32) for name in names]
    shapes = [part.shape for part in parts]
    # ``full`` is 384 x 384; ``u`` and ``v`` are 384 x r each.  A rank-r map is kept as its
    # product: one 384 x 384 product per query either way (~20 us).
    square = len(parts) == 1
    if any(len(shape) != 2 or shape[0] != DIM for shape in shapes) or (
        shapes[0] != (DIM, DIM) if square else shapes[0] != shapes[1]
    ):
        log.warning("query adapter: %s holds matrices of shapes %s; relevance runs without it", path, shapes)
        return None
    out: Matrix = parts[0] if square else parts[0] @ parts[1].T
    return out


def adapted(unit: npt.NDArray[np.float32], model: str) -> Matrix | None:
    """``q'`` for the unit query vector ``unit`` of a store whose space is ``model``, or None
    where the adapter does not apply (another model or dimension, or no usable file)."""
    if not applies(model, int(unit.shape[-1])):
        return None
    m = matrix()
    if m is None:
        return None
    moved = unit + m @ unit
    norm = float(np.linalg.norm(moved))
    if norm == 0.0 or not np.isfinite(norm):
        return None
    out: Matrix = (moved / norm).astype(np.float32)
    return out
