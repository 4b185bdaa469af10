"""What each ``memory`` subcommand runs: one client call, and the lines it prints."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from memory_cli import render
from memory_cli.arguments import EXIT_DEGRADED, EXIT_ERROR, EXIT_OK
from memoryd_client import MemoryClient, NotFound

#: The daemon's bound on messages per memory.observe call.
OBSERVE_BATCH = 100


class Usage(Exception):
    """A usage error found while running: the command prints it and exits 2."""


#: (the RPC result for --json, the human lines, the exit code)
Outcome = Tuple[Any, List[str], int]


def _search(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    hits = client.search(
        args.query,
        limit=args.limit,
        about=args.about,
        this_chat=args.this_chat,
        min_relevance=args.min_relevance,
        types=args.types,
    )
    return hits, render.search_lines(hits), EXIT_OK


def _add(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    content = read_stdin() if args.content == "-" else args.content
    result = client.add(
        content,
        source=args.source,
        expires_days=args.expires,
        subjects=args.subjects,
        shared=args.shared,
        sensitivity=args.sensitivity,
    )
    short_id = result.get("short_id") or str(result.get("id", "?"))[: render.MIN_SHORT_ID]
    scope = render.scope_label(result.get("scope") or ("group" if args.shared else "personal"))
    if result.get("deduplicated"):
        return result, [f"Memory refreshed ({scope}): {short_id} (already known, not added again)"], EXIT_OK
    lines = [f"Memory added ({scope}): {short_id}"]
    for old_id in result.get("superseded") or []:
        lines.append(render.replaced_line(old_id, _content_of(client, old_id)))
    return result, lines, EXIT_OK


def _content_of(client: MemoryClient, memory_id: str) -> Optional[str]:
    try:
        return str(client.get(memory_id).get("content", ""))
    except NotFound:
        return None


def _list(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    memories = client.list(
        limit=args.limit,
        include_expired=args.include_expired,
        about=args.about,
        this_chat=args.this_chat,
        types=args.types,
    )
    width = shutil.get_terminal_size((100, 24)).columns
    return memories, render.list_lines(memories, width), EXIT_OK


def _delete(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    result = client.delete(args.memory_id)
    deleted_id = result.get("id")
    if not result.get("deleted"):
        print("Memory not found or not owned by you", file=sys.stderr)
        return result, [], EXIT_ERROR
    full_id = str(deleted_id or args.memory_id)
    # Echo the prefix the caller typed (in the id's canonical case); a full id shows as 8 chars.
    typed = len(args.memory_id.strip())
    shown = full_id[: max(render.MIN_SHORT_ID, typed if typed < len(full_id) else 0)]
    return result, [f"Memory deleted: {shown}"], EXIT_OK


def _pin(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    record = client.pin(args.memory_id) if args.command == "pin" else client.unpin(args.memory_id)
    shown = str(record.get("id", args.memory_id))[: render.MIN_SHORT_ID]
    return record, [f"Memory {'pinned' if record.get('pinned') else 'unpinned'}: {shown}"], EXIT_OK


def _context(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    result = client.context(
        args.message,
        limit=args.limit,
        max_chars=args.max_chars,
        min_relevance=args.min_relevance,
        include_summary=False if args.no_summary else None,
    )
    # With the summary, an empty block means nothing is stored; without it, nothing relevant.
    empty = "No memories found." if args.no_summary else "Nothing known yet."
    return result, (result.get("text") or empty).splitlines(), EXIT_OK


def _forget_person(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    result = client.forget_person(args.person, delete_person_record=not args.keep_person)
    name = result.get("person", {}).get("name", args.person)
    count = len(result.get("deleted") or [])
    return result, [f"Forgot {name}: {count} memor{'y' if count == 1 else 'ies'} deleted"], EXIT_OK


def _forget_all(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    if not args.yes:
        raise Usage("forget-all erases everything stored about you; confirm with --yes")
    result = client.forget_all(include_group=args.include_group)
    erased = result.get("erased") or {}
    listed = ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in erased.items() if count)
    return result, [f"Erased: {listed or 'nothing was stored'}"], EXIT_OK


def _history(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    versions = client.history(args.memory_id)
    return versions, render.history_lines(versions), EXIT_OK


def _observe(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    messages = _read_messages()
    accepted = 0
    for start in range(0, len(messages), OBSERVE_BATCH):
        result = client.observe(messages[start : start + OBSERVE_BATCH], session_key=args.session_key)
        accepted += int(result.get("accepted", 0))
    noun = "message" if accepted == 1 else "messages"
    return {"accepted": accepted}, [f"Accepted {accepted} {noun} for extraction"], EXIT_OK


def _read_messages() -> List[Dict[str, Any]]:
    messages: List[Dict[str, Any]] = []
    for number, line in enumerate(read_stdin().splitlines(), 1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise Usage(f"stdin line {number}: not JSON ({exc})") from None
        if not isinstance(message, dict):
            raise Usage(f'stdin line {number}: expected an object like {{"role": "user", "content": "..."}}')
        messages.append(message)
    if not messages:
        raise Usage('no messages on stdin: one JSON object per line, e.g. {"role": "user", "content": "..."}')
    return messages


def _health(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    health = client.health()
    # A probe (a container's health check, a cron job) tells a degraded daemon by the status alone.
    status = EXIT_DEGRADED if health.get("status") == "degraded" else EXIT_OK
    return health, render.health_lines(health), status


COMMANDS: Dict[str, Callable[[MemoryClient, argparse.Namespace], Outcome]] = {
    "search": _search,
    "add": _add,
    "list": _list,
    "delete": _delete,
    "pin": _pin,
    "unpin": _pin,
    "context": _context,
    "forget-person": _forget_person,
    "forget-all": _forget_all,
    "history": _history,
    "observe": _observe,
    "health": _health,
}


def read_stdin() -> str:
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Usage("stdin is not UTF-8 text") from None
    return text.rstrip("\r\n")
