"""The daemon keeps numpy's OpenBLAS on one thread (threadpoolctl), unless the operator set
OPENBLAS_NUM_THREADS.  Each case runs in a fresh interpreter: OpenBLAS sizes its pool when it
loads, and this process's pool is whatever earlier tests left."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import json, threadpoolctl
from memoryd.server.startup import single_threaded_blas
def threads():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
before = threads()
single_threaded_blas()
print(json.dumps([before, threads()]))
"""


def blas_threads_before_and_after(**env: str) -> tuple[list[int], list[int]]:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | env
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=environ, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    before, after = json.loads(done.stdout)
    return before, after


def test_the_daemon_runs_numpys_blas_on_one_thread() -> None:
    before, after = blas_threads_before_and_after()
    if max(before, default=1) < 2:
        pytest.skip("OpenBLAS starts with one thread here (one CPU): nothing to limit")
    assert after and set(after) == {1}


def test_an_explicit_openblas_thread_count_is_left_alone() -> None:
    before, after = blas_threads_before_and_after(OPENBLAS_NUM_THREADS="2")
    assert before == after and set(after) == {2}
