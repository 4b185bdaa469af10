"""Running `memoryd <admin command>` as a real process, as an operator would."""

from __future__ import annotations

import json
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


#: A memory as ``memoryd export`` writes it: import tests change one field at a time.
GOOD_MEMORY: dict[str, Any] = {
    "id": "01JBBBBBBBBBBBBBBBBBBBBBBB",
    "scope": "personal",
    "owner": "carol",
    "chat_id": None,
    "source": "agent",
    "content": "a good memory",
    "subjects": [],
    "metadata": {},
    "confidence": 1.0,
    "created_at": "2025-01-02T03:04:05.678Z",
    "updated_at": "2025-01-02T03:04:05.678Z",
    "expires_at": None,
    "deleted_at": None,
    "expiry_recorded_at": None,
    "superseded_by": None,
    "access_count": 0,
    "last_access_at": None,
}


def good_line(number: int, **changes: Any) -> bytes:
    """An export line of ``GOOD_MEMORY`` with an id of its own (``number``) and ``changes``."""
    line = {**GOOD_MEMORY, "id": f"01JBBBBBBBBBBBBBBBBBBBBB{number:02d}", **changes}
    return json.dumps(line).encode() + b"\n"
