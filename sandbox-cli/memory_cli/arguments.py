"""The ``memory`` command's arguments: the parser, its help, and the checks on each value.

The value checks hold the ranges the daemon accepts, so a bad value is a usage error (exit 2)
before any call is made.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Dict

from memory_cli import __version__
from memoryd_client import __version__ as client_version

#: The exit codes (the help's epilog below lists them for users).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
#: `memory health`: the daemon answers, but says it is degraded (its reason is printed).
EXIT_DEGRADED = 4
#: The daemon's bound on memory.add's expires_days (100 years).
MAX_EXPIRES_DAYS = 36500

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
  0 ok, 1 error from the daemon (or nothing to delete), 2 usage, 3 daemon unreachable,
  4 the daemon is degraded (health)
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
    context.add_argument("--no-summary", action="store_true",
                         help="leave out the summary of everything known about you ('About the user:')")  # fmt: skip
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


def subcommands(parser: argparse.ArgumentParser) -> Dict[str, argparse.ArgumentParser]:
    """``build_parser()``'s subcommands by name, each with its own parser (its usage, its help)."""
    found: Dict[str, argparse.ArgumentParser] = parser.get_default("_subcommands")
    return dict(found)


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


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _fraction(text: str) -> float:
    """An argparse type: a number from 0 to 1 (a relevance threshold)."""
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1: {text!r}")
    return value


def _days(text: str) -> float:
    value = _positive_float(text)
    if value > MAX_EXPIRES_DAYS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_EXPIRES_DAYS} days: {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = _number(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value
