"""`memoryd gc [--dry-run]`: hard-remove what was deleted or expired more than retention_days
ago, evict what max_entries does not allow, then the engine's housekeeping (SQLite: merge the FTS
index and checkpoint the WAL; PostgreSQL: VACUUM (ANALYZE) of memoryd's tables)."""

from __future__ import annotations

import sys
from typing import TextIO

from memoryd.admin.common import EXIT_OK, open_store, print_json
from memoryd.config import Config
from memoryd.ids import DAY_MS
from memoryd.store.admin_records import PURGE_REASONS


def run(config: Config, *, dry_run: bool, as_json: bool, out: TextIO = sys.stdout) -> int:
    retention_days = config.lifecycle.retention_days
    complete: bool | None = None
    done = ""
    # A dry run only reads: it works on a read-only disk and never migrates the store.
    with open_store(config, readonly=dry_run) as store:
        report = store.maintenance.gc(retention_ms=int(retention_days * DAY_MS), dry_run=dry_run)
        lifecycle = config.lifecycle
        eviction = store.maintenance.enforce_max_entries(
            per_user=lifecycle.max_entries_per_user,
            per_chat=lifecycle.max_entries_per_chat,
            protect_recent_ms=int(lifecycle.protect_recent_days * DAY_MS),
            dry_run=dry_run,
        )
        # A dry run counts what is over the caps: pinned memories count but stay, so at most that goes.
        evicted = sum(count - limit for count, limit in eviction.scopes.values()) if dry_run else eviction.evicted
        if not dry_run:
            housekeeping = store.maintenance.maintain(compact=True, release_space=True)
            report.optimize_steps, complete = housekeeping.compact_steps, housekeeping.complete
            done = housekeeping.done
    data = {**report.to_dict(), "retention_days": retention_days, "evicted": evicted}
    if complete is not None:
        data["checkpoint_complete"] = complete
    if as_json:
        print_json(data, out)
        return EXIT_OK
    verb = "would remove" if dry_run else "removed"
    by_reason = ", ".join(f"{report.purged_by_reason[reason]} {reason}" for reason in PURGE_REASONS)
    out.write(
        f"gc {verb} {report.purged} memories ({by_reason} before {data['cutoff']}, retention {retention_days:g} days)"
        f" and {report.events_pruned} old audit events in {report.seconds:.2f} s\n"
    )
    if evicted:
        out.write(f"{'would evict up to' if dry_run else 'evicted'} {evicted} memories past max_entries\n")
    if done:
        out.write(done + "\n")
    return EXIT_OK
