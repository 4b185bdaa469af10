"""`memoryd stats`: what the store holds, as a table or JSON."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from memoryd.admin.common import EXIT_OK, human_bytes, open_store, print_json, printable, table
from memoryd.config import Config
from memoryd.store.admin_records import MEMORY_STATES

#: Users shown in the table (JSON has all of them).
TOP_USERS = 20


def gather(config: Config) -> dict[str, Any]:
    with open_store(config, readonly=True) as store:
        return store.maintenance.stats()


def run(config: Config, *, as_json: bool, out: TextIO = sys.stdout) -> int:
    data = gather(config)
    if as_json:
        print_json(data, out)
    else:
        out.write("\n".join(render(data)) + "\n")
    return EXIT_OK


#: Width of the label column of the lines under the tables ("maintenance  ").
_LABEL_WIDTH = 13


def _entry(label: str, text: str, *more: str | None) -> list[str]:
    """A labelled line, and lines continuing it under its text (empty ones left out)."""
    return [
        f"{label:<{_LABEL_WIDTH}}{printable(text)}",
        *(" " * _LABEL_WIDTH + printable(line) for line in more if line),
    ]


def _row(name: str, states: dict[str, int]) -> list[object]:
    return [name, sum(states[s] for s in MEMORY_STATES), *(states[s] for s in MEMORY_STATES)]


def render(data: dict[str, Any]) -> list[str]:
    header = ["", "total", *MEMORY_STATES]
    memories = {k: v for k, v in data["memories"].items() if k != "total"}
    scopes = data["by_scope"]
    lines = table(
        ["memories", *header[1:]],
        [
            _row("all", memories),
            _row("personal", scopes["personal"]),
            _row(f"group ({scopes['chats']} chat{'' if scopes['chats'] == 1 else 's'})", scopes["group"]),
        ],
    )
    lines.append("")
    lines += table(["by source", *header[1:]], [_row(source, s) for source, s in data["by_source"].items()])
    users = data["by_user"]
    lines.append("")
    title = f"by user ({len(users)})" if len(users) <= TOP_USERS else f"top {TOP_USERS} of {len(users)} users"
    lines += table([title, *header[1:]], [_row(u["user"], u) for u in users[:TOP_USERS]])
    lines.append("")
    embedding = data["embedding"]
    if embedding["model"] is None:
        described = "none configured (keyword search only)"
    else:
        described = (
            f"{embedding['model']}, dim {embedding['dim']}, generation {embedding['generation']}: "
            f"{embedding['embedded']} memories embedded"
        )
    reindex = embedding["reindex_requested"]
    lines += _entry("embedding", described, reindex and f"reindex to {reindex} requested")
    backlog = data["backlog"]
    pending = ", ".join(f"{kind} {n}" for kind, n in backlog.items() if kind not in ("failing", "last_error"))
    lines += _entry("backlog", f"{pending} pending, {backlog['failing']} failing")
    extraction = data["extraction"]
    lines += _entry(
        "extraction",
        f"{extraction['pending_sessions']} sessions pending ({extraction['failing_sessions']} failing), "
        f"{extraction['parked_sessions']} parked; {extraction['messages_held']} observed messages held",
        extraction["last_error"] and f"last error: {extraction['last_error']}",
    )
    access = data["access"]
    lines += _entry("access", f"{access['memories_retrieved']} memories retrieved {access['retrievals']} times")
    database, pages = data["database"], data["pages"]
    if database.get("engine") == "postgres":  # the server's files: its WAL and free space are its own
        size = f"{human_bytes(database['bytes'])} (the whole database), schema v{data['schema_version']}"
    else:
        size = (
            f"{human_bytes(database['bytes'])} ({human_bytes(database.get('file', 0))} + "
            f"WAL {human_bytes(database.get('wal', 0))}; {pages['free_pages']} free pages), schema v{data['schema_version']}"
        )
    lines += _entry("database", size, database["path"])
    last = data["last_maintenance"]
    if last:
        lines += _entry(
            "maintenance",
            f"last {last.get('at')}: {last.get('expired_marked')} expired, {last.get('purged')} purged, "
            f"{last.get('evicted')} evicted ({last.get('ms')} ms)",
        )
    else:
        lines += _entry("maintenance", "has not run yet")
    return lines
