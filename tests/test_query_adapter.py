"""The learned query adapter's file and map (store/query_adapter.py) and relevance's use of it."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np
import pytest

from memoryd.store import query_adapter, relevance


def digest(path: Path) -> str:
    """The sha256 ``query_adapter.matrix`` checks a file against."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def unit_vector(seed: int, dim: int = query_adapter.DIM) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def test_the_shipped_file_loads_with_its_digest_and_shapes() -> None:
    assert digest(query_adapter.PATH) == query_adapter.SHA256
    found = query_adapter.matrix()
    assert found is not None
    assert found.shape == (query_adapter.DIM, query_adapter.DIM) and found.dtype == np.float32
    assert float(np.abs(found).max()) > 0  # a map, not the identity


def test_the_adapted_query_is_a_moved_unit_vector_for_the_local_model_only() -> None:
    q = unit_vector(1)
    moved = query_adapter.adapted(q, query_adapter.MODEL_ID)
    assert moved is not None
    assert float(np.linalg.norm(moved)) == pytest.approx(1.0, abs=1e-5)
    assert 0.3 < float(moved @ q) < 0.9999  # moved, not replaced
    assert query_adapter.adapted(q, "ollama:nomic-embed-text") is None
    assert query_adapter.adapted(unit_vector(1, 768), query_adapter.MODEL_ID) is None


def test_a_file_that_is_not_the_shipped_one_is_not_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    forged = tmp_path / "query_adapter.npz"
    np.savez(forged, u=np.zeros((384, 64), np.float32), v=np.zeros((384, 64), np.float32))
    with caplog.at_level(logging.WARNING, logger="memoryd.store"):
        assert query_adapter.matrix(forged) is None
        assert query_adapter.matrix(tmp_path / "missing.npz") is None
    assert "sha256 differs" in caplog.text and "cannot read" in caplog.text
    assert query_adapter.matrix(forged, digest(forged)) is not None  # right digest, read


def test_a_file_of_the_wrong_shape_is_not_read(tmp_path: Path) -> None:
    wrong = tmp_path / "query_adapter.npz"
    np.savez(wrong, u=np.zeros((128, 64), np.float32), v=np.zeros((128, 64), np.float32))
    assert query_adapter.matrix(wrong, digest(wrong)) is None
    np.savez(wrong, full=np.zeros((384, 128), np.float32))
    assert query_adapter.matrix(wrong, digest(wrong)) is None
    np.savez(wrong, full=np.zeros((384, 384), np.float32))  # a full matrix is read as it is
    assert query_adapter.matrix(wrong, digest(wrong)) is not None


def test_relevance_reads_the_adapted_cosine_with_the_shipped_weights_and_falls_back_without() -> None:
    rows = np.zeros((3, 8))
    rows[:, 0] = [0.62, 0.35, 0.2]
    rows[:, 1] = [0.5, 0.0, 0.0]
    cosines = {1: 0.62, 2: 0.35, 3: 0.2}
    plain = relevance.by_rowid([1, 2, 3], rows, cosines)
    assert plain == relevance.by_rowid([1, 2, 3], rows, cosines, None)
    assert list(plain.values()) == pytest.approx(relevance.estimate(rows, np.ones(3, bool), relevance.FALLBACK))
    high = relevance.by_rowid([1, 2, 3], rows, cosines, {1: 0.8, 2: 0.3, 3: 0.1})
    low = relevance.by_rowid([1, 2, 3], rows, cosines, {1: 0.3, 2: 0.3, 3: 0.1})
    assert high[1] > low[1]  # a higher adapted cosine, a higher relevance
    assert high != plain
    assert set(relevance.SHIPPED.memory) - set(relevance.FALLBACK.memory) == {"adapted"}
    assert set(relevance.SHIPPED.query) - set(relevance.FALLBACK.query) == {"best_adapted"}
