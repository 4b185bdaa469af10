"""Real disk faults for tests: a small tmpfs gives a real ENOSPC, a read-only remount a real
EROFS, bytes overwritten mid-file a real corruption.  Mounting needs root (CI runs as root);
without it the tests that need a mount are skipped."""

from __future__ import annotations

import contextlib
import errno
import os
import random
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from memoryd.store import NewMemory
from memoryd.store.sqlite import Store


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, timeout=30)


@contextlib.contextmanager
def tmpfs(size: str = "4m") -> Iterator[Path]:
    """A fresh tmpfs of ``size`` mounted in a temp dir (unmounted and removed afterwards)."""
    where = Path(tempfile.mkdtemp(prefix="md-fs-", dir="/tmp"))
    try:
        _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where))
    except (OSError, subprocess.CalledProcessError) as exc:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        yield where
    finally:
        # Lazy: a process a failed test left behind must not keep the mount (or the suite) busy.
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True, timeout=30)
        where.rmdir()


def remount_read_only(mount_point: Path) -> None:
    _mount("-o", "remount,ro", str(mount_point))


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until the file system has not one block left."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as out:
        for chunk in (1 << 16, 1 << 12, 1 << 9):
            try:
                while True:
                    out.write(b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    return filler


def corrupt_mid_file(path: Path, length: int = 32 * 1024, seed: int = 8) -> None:
    """Overwrite ``length`` bytes in the middle of ``path`` with random bytes."""
    size = path.stat().st_size
    assert size > 2 * length, f"{path} is too small to corrupt in the middle ({size} bytes)"
    with open(path, "r+b") as damaged:
        damaged.seek(size // 2 - length // 2)
        damaged.write(random.Random(seed).randbytes(length))
        damaged.flush()
        os.fsync(damaged.fileno())


def build_store(db_path: Path, memories: int = 2000) -> None:
    """A store of ``memories`` of alice's memories (about 2 MB at 2000), checkpointed and closed."""
    db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    words = ["alpha", "beta", "gamma", "delta", "kappa"]
    rng = random.Random(1)
    with Store(db_path, readers=1) as store:
        store.memories.add_many(
            NewMemory(
                content=f"memory {i} " + " ".join(rng.choice(words) for _ in range(60)),
                owner="alice",
                chat_id=None,
                shared=False,
                source="t",
            )
            for i in range(memories)
        )
        store.lifecycle.checkpoint()
    # Statistics for every table, as a store in use has them: otherwise the next open's
    # PRAGMA optimize analyzes the tables, reads whichever pages a test damaged, and the damage
    # is found at open (refused all the same) instead of where the test looks for it.
    connection = apsw.Connection(str(db_path))
    try:
        connection.execute("ANALYZE")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
