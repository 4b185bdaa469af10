"""The ``memory`` command: one subcommand per memoryd RPC, identity from the environment.

Exit codes: 0 ok; 1 the daemon answered with an error (``Error: <message>`` on stderr) or
nothing visible matched a delete; 2 usage (bad arguments, no identity configured); 3 the
daemon is unreachable (the message names the socket path tried).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from memory_cli import __version__, render
from memoryd_client import (
    ConnectionLost,
    DaemonUnavailable,
    InvalidIdentity,
    MemoryClient,
    MemoryClientError,
    MemorydRpcError,
    MissingIdentity,
    NotFound,
    RequestTimeout,
)
from memoryd_client import __version__ as client_version

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
#: The daemon's bound on memory.add's expires_days (100 years).
MAX_EXPIRES_DAYS = 36500
#: The daemon's bound on messages per memory.observe call.
OBSERVE_BATCH = 100

ENVIRONMENT_HELP = """\
environment:
  MEMORYD_SOCKET, then ASH_RPC_SOCKET       the daemon's socket (default: the daemon's default path)
  MEMORY_CONTEXT_TOKEN, then ASH_CONTEXT_TOKEN
                                            signed context token from the host; when set, the
                                            user and chat come from it unless given below
  MEMORY_USER_ID, then ASH_USER_ID          who the memories belong to
  MEMORY_CHAT_ID, then ASH_CHAT_ID          the current chat (its shared memories are visible)
  MEMORY_CHAT_TYPE, then ASH_CHAT_TYPE      private, group or supergroup: in a group, what was
                                            said in private stays out; sensitive memories show
                                            only in private (a token's chat_type claim decides)

exit codes:
  0 ok, 1 error from the daemon (or nothing to delete), 2 usage, 3 daemon unreachable
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but a bare ``memory`` prints the help on stderr and exits 2 (usage)."""

    def error(self, message: str) -> Any:  # argparse's own exit code for usage errors is 2 too
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memory",
        description="Search and store long-term memories through memoryd.",
        epilog=ENVIRONMENT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"memory {__version__} (memoryd-client {client_version})"
    )
    parser.add_argument("--socket", metavar="PATH", help="daemon socket (overrides $MEMORYD_SOCKET)")
    parser.add_argument(
        "--timeout", type=_positive_float, default=10.0, metavar="SECONDS", help="per-call timeout (default 10)"
    )
    parser.add_argument("--json", action="store_true", help="print the RPC result as JSON")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    # --json is accepted before or after the subcommand; SUPPRESS keeps a sub-parser from
    # resetting a --json given before it.
    json_flag: Dict[str, Any] = {
        "action": "store_true",
        "default": argparse.SUPPRESS,
        "help": "print the RPC result as JSON",
    }

    search = commands.add_parser("search", help="search memories, best match first")
    search.add_argument("query", metavar="QUERY")
    search.add_argument(
        "-n", "--limit", type=_int_in(1, 100), default=10, metavar="N", help="at most N hits (1-100, default 10)"
    )
    search.add_argument("-a", "--about", metavar="PERSON", help='only memories about PERSON ("Sarah", "my wife")')
    search.add_argument("--this-chat", action="store_true", help="only memories learned in the current chat")
    search.add_argument("--min-relevance", type=_fraction, metavar="P",
                        help="only hits at least this relevant, 0..1 (default: the daemon's floor)")  # fmt: skip
    search.add_argument("-t", "--type", action="append", dest="types", metavar="TYPE",
                        help="only memories of TYPE (repeatable), e.g. episode, preference")  # fmt: skip
    search.add_argument("--json", **json_flag)

    add = commands.add_parser("add", help="store a memory (CONTENT '-' reads stdin)")
    add.add_argument("content", metavar="CONTENT")
    add.add_argument("-s", "--source", metavar="S", help='where it came from (default "agent")')
    add.add_argument("-e", "--expires", type=_days, metavar="DAYS", help="forget it after DAYS days (at most 36500)")
    add.add_argument(
        "-S", "--subject", action="append", dest="subjects", metavar="NAME", help="who it is about (repeatable)"
    )
    add.add_argument("--shared", action="store_true", help="visible to everyone in the current chat")
    add.add_argument(
        "--sensitivity",
        choices=("public", "personal", "sensitive"),
        help="sensitive: shown only in private chats",
    )
    add.add_argument("--json", **json_flag)

    listing = commands.add_parser("list", help="list memories, newest first")
    listing.add_argument(
        "-n", "--limit", type=_int_in(1, 1000), default=20, metavar="N", help="at most N (1-1000, default 20)"
    )
    listing.add_argument("--include-expired", action="store_true", help="include expired memories")
    listing.add_argument("-a", "--about", metavar="PERSON", help='only memories about PERSON ("Sarah", "my wife")')
    listing.add_argument("--this-chat", action="store_true", help="only memories learned in the current chat")
    listing.add_argument("-t", "--type", action="append", dest="types", metavar="TYPE",
                         help="only memories of TYPE (repeatable; episodes are listed only this way)")  # fmt: skip
    listing.add_argument("--json", **json_flag)

    delete = commands.add_parser("delete", help="delete a memory by id or unique id prefix (>= 8 chars)")
    delete.add_argument("memory_id", metavar="ID")
    delete.add_argument("--json", **json_flag)

    for verb, what in (("pin", "keep a memory for good (never evicted or expired)"), ("unpin", "undo pin")):
        pinning = commands.add_parser(verb, help=f"{what}: by id or unique id prefix (>= 8 chars)")
        pinning.add_argument("memory_id", metavar="ID")
        pinning.add_argument("--json", **json_flag)

    context = commands.add_parser("context", help="what to know before replying to MESSAGE (a prompt block)")
    context.add_argument("message", metavar="MESSAGE")
    context.add_argument("-n", "--limit", type=_int_in(1, 50), metavar="N", help="at most N memories (1-50, default 5)")
    context.add_argument(
        "--max-chars",
        type=_int_in(100, 100_000),
        metavar="C",
        help="the block's length limit (100-100000, default 2000)",
    )
    context.add_argument("--min-relevance", type=_fraction, metavar="P",
                         help="memories only if the best is at least this relevant, 0..1 (default: the daemon's)")  # fmt: skip
    context.add_argument("--json", **json_flag)

    forget = commands.add_parser("forget-person", help="delete a person and the memories about them")
    forget.add_argument("person", metavar="PERSON", help='a name, alias, relationship ("my wife") or person id')
    forget.add_argument("--keep-person", action="store_true", help="delete the memories only, keep the person")
    forget.add_argument("--json", **json_flag)

    erase = commands.add_parser("forget-all", help="erase everything stored about you, at once (needs --yes)")
    erase.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")
    erase.add_argument("--include-group", action="store_true", help="also delete the group memories you added")
    erase.add_argument("--json", **json_flag)

    history = commands.add_parser("history", help="the versions of a memory: what it replaced, what replaced it")
    history.add_argument("memory_id", metavar="ID", help="a memory id or unique id prefix (>= 8 chars)")
    history.add_argument("--json", **json_flag)

    observe = commands.add_parser(
        "observe",
        help="post conversation messages (JSON lines on stdin): searchable at once as episodes, and "
        "extracted into memories in the background when the daemon has an LLM",
    )
    observe.add_argument("--session-key", metavar="KEY", help="the conversation they belong to (default: the chat)")
    observe.add_argument("--json", **json_flag)

    health = commands.add_parser("health", help="is the daemon up? (needs no identity)")
    health.add_argument("--json", **json_flag)

    mcp = commands.add_parser(
        "mcp", help="serve the memory tools to an MCP client (Claude Code, Cursor, Codex) over stdio"
    )
    mcp.add_argument(
        "--print-config",
        choices=("claude", "cursor", "codex"),
        metavar="CLIENT",
        help="print the settings snippet for CLIENT (claude, cursor or codex) and exit",
    )
    mcp.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="warning",
        help="what the bridge logs on stderr (default warning)",
    )
    # Kept so that a misplaced flag gets its subcommand's usage (see main).
    parser.set_defaults(_subcommands=dict(commands.choices))
    return parser


def _int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high], the range the daemon accepts."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}: {text!r}")
        return value

    return parse


def _fraction(text: str) -> float:
    """An argparse type: a number from 0 to 1 (a relevance threshold)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1: {text!r}")
    return value


def _days(text: str) -> float:
    value = _positive_float(text)
    if value > MAX_EXPIRES_DAYS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_EXPIRES_DAYS} days: {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


# -- subcommands --------------------------------------------------------------------------

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
    content = _read_stdin() if args.content == "-" else args.content
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
    result = client.context(args.message, limit=args.limit, max_chars=args.max_chars, min_relevance=args.min_relevance)
    return result, (result.get("text") or "Nothing known yet.").splitlines(), EXIT_OK


def _forget_person(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    result = client.forget_person(args.person, delete_person_record=not args.keep_person)
    name = result.get("person", {}).get("name", args.person)
    count = len(result.get("deleted") or [])
    return result, [f"Forgot {name}: {count} memor{'y' if count == 1 else 'ies'} deleted"], EXIT_OK


def _forget_all(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    if not args.yes:
        raise _Usage("forget-all erases everything stored about you; confirm with --yes")
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
    for number, line in enumerate(_read_stdin().splitlines(), 1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise _Usage(f"stdin line {number}: not JSON ({exc})") from None
        if not isinstance(message, dict):
            raise _Usage(f'stdin line {number}: expected an object like {{"role": "user", "content": "..."}}')
        messages.append(message)
    if not messages:
        raise _Usage('no messages on stdin: one JSON object per line, e.g. {"role": "user", "content": "..."}')
    return messages


def _health(client: MemoryClient, args: argparse.Namespace) -> Outcome:
    health = client.health()
    return health, render.health_lines(health), EXIT_OK


_COMMANDS: Dict[str, Callable[[MemoryClient, argparse.Namespace], Outcome]] = {
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


def _mcp(args: argparse.Namespace) -> int:
    # Imported here: the other commands never load the bridge.
    if args.print_config:
        from memory_cli.mcp.client_config import print_config

        return print_config(args.print_config, args.socket)
    from memory_cli.mcp.stdio import run

    return run(args.socket, args.timeout, args.log_level)


class _Usage(Exception):
    pass


def _read_stdin() -> str:
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Usage("stdin is not UTF-8 text") from None
    return text.rstrip("\r\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    # A memory may hold any Unicode; a sandbox's stdout may be ASCII.  Never die printing it.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # A flag the subcommand does not take: show that subcommand's usage, not the top level's.
        target = args._subcommands.get(args.command) if args.command else None
        (target or parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command == "mcp":
        return _mcp(args)
    try:
        with MemoryClient(socket_path=args.socket, timeout=args.timeout) as client:
            result, lines, code = _COMMANDS[args.command](client, args)
    except _Usage as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except InvalidIdentity as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MissingIdentity:
        print(
            "Error: no identity: set MEMORY_CONTEXT_TOKEN (or ASH_CONTEXT_TOKEN), or MEMORY_USER_ID (or ASH_USER_ID)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except (DaemonUnavailable, RequestTimeout, ConnectionLost) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except MemorydRpcError as exc:
        print(f"Error: {exc.message}", file=sys.stderr)
        return EXIT_ERROR
    except MemoryClientError as exc:  # e.g. ProtocolError: something that is not memoryd answered
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        for line in lines:
            print(line)
    return code
