"""`memoryd forget-user USER_ID [--dry-run] [--include-group] [--username NAME]`: erase
everything the store holds about one user, at once and physically (see
``memoryd/store/sqlite/admin/erasure.py``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from memoryd.admin.common import EXIT_OK, open_store, print_json, printable
from memoryd.config import Config
from memoryd.store.admin_records import ERASURE_KINDS

#: The actor an operator's erasure is audited under.
OPERATOR = "operator"


def run(
    config: Config,
    *,
    user_id: str,
    dry_run: bool,
    include_group: bool,
    usernames: Sequence[str],
    as_json: bool,
    out: TextIO = sys.stdout,
) -> int:
    with open_store(config) as store:
        counts = store.maintenance.erase_user(
            user_id, actor=OPERATOR, include_group=include_group, usernames=usernames, dry_run=dry_run
        )
    if as_json:
        print_json({"user_id": user_id, "dry_run": dry_run, "include_group": include_group, "erased": counts}, out)
        return EXIT_OK
    verb = "would erase" if dry_run else "erased"
    listed = ", ".join(f"{counts[kind]} {kind.replace('_', ' ')}" for kind in ERASURE_KINDS)
    out.write(f"forget-user {verb} for {printable(user_id)}: {listed}\n")
    return EXIT_OK
