"""`memoryd check [--repair]`: integrity and index consistency (see store/consistency.py)."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from memoryd.admin.common import EXIT_OK, EXIT_PROBLEMS, open_store, print_json
from memoryd.config import Config
from memoryd.store.admin_records import Finding


def run(config: Config, *, repair: bool, as_json: bool, out: TextIO = sys.stdout) -> int:
    # Damage is this command's finding, reported below; the store's own "run `memoryd check`"
    # line would only repeat it.
    store_log = logging.getLogger("memoryd.store")
    level = store_log.level
    store_log.setLevel(logging.CRITICAL)
    try:
        findings, repaired = _check(config, repair)
    finally:
        store_log.setLevel(level)
    healthy = all(f.ok for f in findings)
    if as_json:
        print_json({"ok": healthy, "checks": [f.to_dict() for f in findings], "repaired": repaired}, out)
    else:
        out.write(render(findings, repaired, repair))
    return EXIT_OK if healthy else EXIT_PROBLEMS


def _check(config: Config, repair: bool) -> tuple[list[Finding], list[str]]:
    repaired: list[str] = []
    # Only --repair writes: a plain check also works on a read-only disk.
    with open_store(config, readonly=not repair) as store:
        findings = store.maintenance.check()
        if repair and any(not f.ok and f.repairable for f in findings):
            repaired = store.maintenance.repair(findings)
    if repaired:
        # Checked again on fresh connections: FTS5's integrity check trusts the index
        # structure a connection cached before the rebuild, and would report false damage.
        with open_store(config, readonly=True) as store:
            findings = store.maintenance.check()
    return findings, repaired


def render(findings: list[Finding], repaired: list[str], repair: bool) -> str:
    lines = [f"repaired: {action}" for action in repaired]
    for finding in findings:
        mark = "ok     " if finding.ok else "PROBLEM"
        lines.append(f"{mark}  {finding.check:<15} {finding.detail}")
    problems = [f for f in findings if not f.ok]
    if not problems:
        lines.append("the database is consistent")
    elif not repair and any(f.repairable for f in problems):
        lines.append("run `memoryd check --repair` to fix the index problems")
    return "\n".join(lines) + "\n"
