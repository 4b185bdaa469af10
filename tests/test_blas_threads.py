"""The daemon keeps numpy's OpenBLAS on one thread (threadpoolctl), unless the operator set
OPENBLAS_NUM_THREADS."""

from __future__ import annotations

import pytest
import threadpoolctl

from memoryd.server.daemon import single_threaded_blas


def blas_threads() -> list[int]:
    return [info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]


def test_the_daemon_runs_numpys_blas_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # restored on leaving
        assert blas_threads() and set(blas_threads()) == {2}
        single_threaded_blas()
        assert set(blas_threads()) == {1}


def test_an_explicit_openblas_thread_count_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        single_threaded_blas()
        assert set(blas_threads()) == {2}
