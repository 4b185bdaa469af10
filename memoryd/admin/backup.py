"""`memoryd backup PATH`: a consistent copy of the live database (SQLite's backup API)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from memoryd.admin.common import EXIT_OK, human_bytes
from memoryd.config import Config
from memoryd.errors import StoreError
from memoryd.store import backends


def run(config: Config, *, target: Path, force: bool, compact: bool = False, out: TextIO = sys.stdout) -> int:
    if config.storage.backend == "sqlite" and not config.db_path.exists():
        raise StoreError(f"no database at {config.db_path} (check --data-dir / data_dir)")
    report = backends.backup(config, target, overwrite=force, compact=compact)
    out.write(
        f"backed up {config.db_path} to {report.path}: {human_bytes(report.bytes)} "
        f"({report.pages} pages) in {report.seconds:.2f} s, quick_check ok\n"
    )
    return EXIT_OK
