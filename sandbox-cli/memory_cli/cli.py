"""The ``memory`` command: one subcommand per memoryd RPC, identity from the environment.

Exit codes: 0 ok; 1 the daemon answered with an error (``Error: <message>`` on stderr) or
nothing visible matched a delete; 2 usage (bad arguments, no identity configured); 3 the
daemon is unreachable (the message names the socket path tried).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from memory_cli.arguments import (
    EXIT_DEGRADED,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    build_parser,
    subcommands,
)
from memory_cli.commands import COMMANDS, Usage
from memoryd_client import (
    ConnectionLost,
    DaemonUnavailable,
    InvalidIdentity,
    MemoryClient,
    MemoryClientError,
    MemorydRpcError,
    MissingIdentity,
    RequestTimeout,
)

__all__ = [
    "EXIT_DEGRADED",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "build_parser",
    "main",
    "subcommands",
]


def _mcp(args: argparse.Namespace) -> int:
    # Imported here: the other commands never load the bridge.
    if args.print_config:
        from memory_cli.mcp.client_config import print_config

        return print_config(args.print_config, args.socket)
    from memory_cli.mcp.stdio import run

    return run(args.socket, args.timeout, args.log_level)


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
        target = subcommands(parser).get(args.command) if args.command else None
        (target or parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command == "mcp":
        return _mcp(args)
    try:
        with MemoryClient(socket_path=args.socket, timeout=args.timeout) as client:
            result, lines, code = COMMANDS[args.command](client, args)
    except (Usage, InvalidIdentity) as exc:
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
