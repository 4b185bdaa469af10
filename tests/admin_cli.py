"""Running `memoryd <admin command>` as a real process, as an operator would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO


def memoryd(
    *args: str, data_dir: Path, env: dict[str, str] | None = None, **popen: Any
) -> subprocess.CompletedProcess[bytes]:
    """``python -m memoryd ARGS --data-dir DATA_DIR``; the caller's MEMORYD_* variables are not
    inherited.  ``popen`` goes to subprocess.run (``umask=``, ``user=``)."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("MEMORYD_")}
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        check=False,
        env={**clean, **(env or {})},
        cwd=REPO,
        timeout=120,
        **popen,
    )


def text(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stdout.decode() + done.stderr.decode()


def export_lines(data: Path, *args: str) -> list[bytes]:
    """`memoryd export` of the data dir ``data``: its lines, header first."""
    done = memoryd("export", *args, data_dir=data)
    assert done.returncode == 0, text(done)
    return done.stdout.splitlines(keepends=True)
