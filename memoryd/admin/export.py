"""`memoryd export [--user U] > file.jsonl`: every memory as versioned JSON Lines (no vectors).

The export reads one snapshot, so it is consistent while the daemon keeps writing; rows stream
to the output, so memory use does not grow with the store.
"""

from __future__ import annotations

import sys
from typing import BinaryIO, TextIO

from memoryd.admin.common import EXIT_OK, open_store, printable
from memoryd.config import Config


def run(config: Config, *, user: str | None, out: BinaryIO | None = None, err: TextIO = sys.stderr) -> int:
    sink = out if out is not None else sys.stdout.buffer
    # Only reads: works on a read-only disk, next to a daemon, and never migrates the store.
    with open_store(config, readonly=True) as store:
        count = store.maintenance.export(sink.write, user=user)
    sink.flush()
    err.write(f"exported {count} memories{f' of {printable(user)}' if user else ''}\n")
    return EXIT_OK
