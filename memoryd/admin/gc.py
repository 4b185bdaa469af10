"""`memoryd gc [--dry-run]`: hard-remove what was deleted or expired more than retention_days
ago, then merge the FTS index and checkpoint the WAL."""

from __future__ import annotations

import sys
from typing import TextIO

from memoryd.admin.common import EXIT_OK, open_store, print_json
from memoryd.config import Config
from memoryd.ids import DAY_MS
from memoryd.store.sqlite.admin.retention import PURGE_REASONS


def run(config: Config, *, dry_run: bool, as_json: bool, out: TextIO = sys.stdout) -> int:
    retention_days = config.lifecycle.retention_days
    checkpoint: tuple[int, int, int] | None = None
    with open_store(config) as store:
        report = store.lifecycle.gc(retention_ms=int(retention_days * DAY_MS), dry_run=dry_run)
        if not dry_run:
            report.optimize_steps = store.lifecycle.optimize()
            checkpoint = store.lifecycle.checkpoint("TRUNCATE")
    data = {**report.to_dict(), "retention_days": retention_days}
    if checkpoint is not None:
        data["checkpoint_complete"] = checkpoint[0] == 0
    if as_json:
        print_json(data, out)
        return EXIT_OK
    verb = "would remove" if dry_run else "removed"
    by_reason = ", ".join(f"{report.purged_by_reason[reason]} {reason}" for reason in PURGE_REASONS)
    out.write(
        f"gc {verb} {report.purged} memories ({by_reason} before {data['cutoff']}, retention {retention_days:g} days)"
        f" and {report.events_pruned} old audit events in {report.seconds:.2f} s\n"
    )
    if checkpoint is not None:
        state = "checkpointed" if checkpoint[0] == 0 else "checkpoint deferred (the daemon was busy; it completes later)"
        out.write(f"FTS index merged in {report.optimize_steps} steps; WAL {state}\n")
    return EXIT_OK
