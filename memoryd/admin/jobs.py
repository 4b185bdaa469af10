"""`memoryd jobs retry`: parked extraction jobs and failing embedding jobs are due again now.

A running daemon picks them up at its next look at the job table (at most 30 seconds later).
"""

from __future__ import annotations

import sys
from typing import TextIO

from memoryd.admin.common import EXIT_OK, open_store, print_json
from memoryd.config import Config


def run(config: Config, *, action: str, as_json: bool = False, out: TextIO = sys.stdout) -> int:
    if action != "retry":  # argparse offers no other choice
        raise ValueError(f"unknown jobs action {action}")
    with open_store(config) as store:
        requeued = store.conversations.retry_parked()
    if as_json:
        print_json({"requeued": requeued}, out)
    else:
        out.write(
            f"re-queued {requeued['extract']} parked extraction jobs and {requeued['embed']} failing embedding jobs\n"
        )
    return EXIT_OK
