"""`memoryd stats`: what the store holds, as a table or JSON."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from memoryd.admin.common import EXIT_OK, human_bytes, open_store, print_json, table
from memoryd.config import Config
from memoryd.store import stats

#: Users shown in the table (JSON has all of them).
TOP_USERS = 20


def gather(config: Config) -> dict[str, Any]:
    with open_store(config, readonly=True) as store:
        return store.lifecycle.stats()


def run(config: Config, *, as_json: bool, out: TextIO = sys.stdout) -> int:
    data = gather(config)
    if as_json:
        print_json(data, out)
    else:
        out.write("\n".join(render(data)) + "\n")
    return EXIT_OK


def _row(name: str, states: dict[str, int]) -> list[object]:
    return [name, sum(states[s] for s in stats.STATES), *(states[s] for s in stats.STATES)]


def render(data: dict[str, Any]) -> list[str]:
    header = ["", "total", *stats.STATES]
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
        lines.append("embedding    none configured (keyword search only)")
    else:
        lines.append(
            f"embedding    {embedding['model']}, dim {embedding['dim']}, generation {embedding['generation']}: "
            f"{embedding['embedded']} memories embedded"
        )
    if embedding["reindex_requested"]:
        lines.append(f"             reindex to {embedding['reindex_requested']} requested")
    backlog = data["backlog"]
    pending = ", ".join(f"{kind} {n}" for kind, n in backlog.items() if kind not in ("failing", "last_error"))
    lines.append(f"backlog      {pending} pending, {backlog['failing']} failing")
    extraction = data["extraction"]
    lines.append(
        f"extraction   {extraction['pending_sessions']} sessions pending ({extraction['failing_sessions']} failing), "
        f"{extraction['parked_sessions']} parked; {extraction['messages_held']} observed messages held"
    )
    if extraction["last_error"]:
        lines.append(f"             last error: {extraction['last_error']}")
    access = data["access"]
    lines.append(f"access       {access['memories_retrieved']} memories retrieved {access['retrievals']} times")
    database = data["database"]
    pages = data["pages"]
    lines.append(
        f"database     {human_bytes(database['bytes'])} ({human_bytes(database.get('file', 0))} + "
        f"WAL {human_bytes(database.get('wal', 0))}; {pages['free_pages']} free pages), schema v{data['schema_version']}"
    )
    lines.append(f"             {database['path']}")
    last = data["last_maintenance"]
    if last:
        lines.append(
            f"maintenance  last {last.get('at')}: {last.get('expired_marked')} expired, {last.get('purged')} purged, "
            f"{last.get('evicted')} evicted ({last.get('ms')} ms)"
        )
    else:
        lines.append("maintenance  has not run yet")
    return lines
