"""`memoryd check [--repair]`: integrity and index consistency (see store/consistency.py)."""

from __future__ import annotations

import sys
from typing import TextIO

from memoryd.admin.common import EXIT_OK, EXIT_PROBLEMS, open_store, print_json
from memoryd.config import Config
from memoryd.store.consistency import Finding


def run(config: Config, *, repair: bool, as_json: bool, out: TextIO = sys.stdout) -> int:
    repaired: list[str] = []
    with open_store(config) as store:
        findings = store.lifecycle.check()
        if repair and any(not f.ok and f.repairable for f in findings):
            repaired = store.lifecycle.repair(findings)
    if repaired:
        # Checked again on fresh connections: FTS5's integrity check trusts the index
        # structure a connection cached before the rebuild, and would report false damage.
        with open_store(config) as store:
            findings = store.lifecycle.check()
    healthy = all(f.ok for f in findings)
    if as_json:
        print_json({"ok": healthy, "checks": [f.to_dict() for f in findings], "repaired": repaired}, out)
    else:
        out.write(render(findings, repaired, repair))
    return EXIT_OK if healthy else EXIT_PROBLEMS


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
