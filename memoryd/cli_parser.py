"""The ``memoryd`` command line: its subcommands and flags (``memoryd.cli`` runs them)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memoryd import __version__


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="TOML config file (env: MEMORYD_CONFIG)")
    parser.add_argument("--data-dir", metavar="DIR", help="where the database lives")
    parser.add_argument(
        "--embedder", choices=["local", "ollama", "openai", "none"], help="embedding backend (default: local)"
    )
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"])


def _command(commands: Any, name: str, **options: Any) -> argparse.ArgumentParser:
    """A subcommand that reads the configuration: it takes the config flags first."""
    parser: argparse.ArgumentParser = commands.add_parser(name, **options)
    _add_config_flags(parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd", description="Long-term memory daemon for AI assistants.")
    parser.add_argument("--version", action="version", version=f"memoryd {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = _command(commands, "serve", help="run the daemon in the foreground")
    serve.add_argument("--socket", metavar="PATH", help="Unix socket path")
    serve.add_argument(
        "--accept-empty-db",
        action="store_true",
        help="start a new store over a zero-length memoryd.db even though the data dir holds other files",
    )

    _command(
        commands,
        "reindex",
        help="switch the store to the configured embedder; the next `memoryd serve` re-embeds in the background",
    )

    token = commands.add_parser(
        "token",
        help="print a signed context token for one sandbox session (uses auth.token_secret)",
        description="Mint a context token with the daemon's auth secret. Hand it to a sandbox as "
        "MEMORY_CONTEXT_TOKEN (or ASH_CONTEXT_TOKEN): calls carrying it act as --user in --chat, nothing else.",
    )
    token.add_argument("--config", metavar="FILE", help="TOML config file (env: MEMORYD_CONFIG)")
    token.add_argument("--user", required=True, metavar="USER_ID", help="the user the sandbox acts for")
    token.add_argument("--chat", metavar="CHAT_ID", help="the chat whose group memories it may see and add")
    token.add_argument(
        "--chat-type", metavar="TYPE", help="private, group or supergroup: what the disclosure rules let it see"
    )
    token.add_argument("--source-username", metavar="NAME", help="who is speaking (recorded with what it adds)")
    token.add_argument("--source-display-name", metavar="NAME", help="the speaker's display name")
    token.add_argument("--message-id", metavar="ID", help="the message the session answers")
    token.add_argument(
        "--ttl", default="15m", metavar="DURATION", help="lifetime: seconds, or e.g. 90s, 15m, 2h, 1d (default 15m)"
    )

    show = _command(commands, "config", help="print the effective configuration, or every default")
    show.add_argument("--socket", metavar="PATH")
    show.add_argument("--defaults", action="store_true", help="print every key with its default")
    _add_admin_commands(commands)
    return parser


def _add_admin_commands(commands: Any) -> None:
    """The host-side admin commands (memoryd.admin): they open the database file directly."""
    stats = _command(commands, "stats", help="memories by state, scope, user and source; size, embedding, backlog")
    stats.add_argument("--json", action="store_true", help="print JSON (every user, not only the top ones)")

    gc = _command(
        commands,
        "gc",
        help="hard-remove memories deleted or expired more than lifecycle.retention_days ago, evict past "
        "lifecycle.max_entries_per_user / _per_chat, then optimize",
    )
    gc.add_argument("--dry-run", action="store_true", help="only count what would be removed")
    gc.add_argument("--json", action="store_true")

    forget = _command(
        commands, "forget-user", help="erase everything stored about USER_ID, physically and at once (not backups)"
    )
    forget.add_argument("user_id", metavar="USER_ID")
    forget.add_argument("--dry-run", action="store_true", help="only count what would be erased")
    forget.add_argument("--include-group", action="store_true",
                        help="delete the group memories the user added too (default: keep them, without their name)")  # fmt: skip
    forget.add_argument("--username", action="append", default=[], metavar="NAME",
                        help="a chat username of the user, to clear from group memories (repeatable)")  # fmt: skip
    forget.add_argument("--json", action="store_true")

    export = _command(
        commands, "export", help="write every memory and person as versioned JSON Lines to stdout (no vectors)"
    )
    export.add_argument("--user", metavar="USER_ID", help="only the memories this user added, and their people")

    load = _command(commands, "import", help="import a `memoryd export` file: all of it or nothing; idempotent")
    load.add_argument("file", type=Path, metavar="FILE")

    backup = _command(commands, "backup", help="consistent online copy of the database to PATH")
    backup.add_argument("path", type=Path, metavar="PATH")
    backup.add_argument("--force", action="store_true", help="overwrite PATH if it exists")
    backup.add_argument("--compact", action="store_true",
                        help="VACUUM INTO: only the pages in use, packed (a smaller file after an upgrade)")  # fmt: skip

    check = _command(commands, "check", help="integrity_check plus FTS and vector index consistency")
    check.add_argument("--repair", action="store_true", help="rebuild FTS and re-queue embeddings where needed")
    check.add_argument("--json", action="store_true")

    migrate = _command(
        commands,
        "migrate",
        help="copy the store between SQLite (data_dir) and PostgreSQL (--url); re-runnable, checked",
    )
    migrate.add_argument("--to", choices=["postgres", "sqlite"], required=True, help="the engine to copy into")
    migrate.add_argument("--url", required=True, help="the PostgreSQL database (libpq URL)")

    jobs = _command(commands, "jobs", help="background jobs: `memoryd jobs retry` re-queues parked and failing jobs")
    jobs.add_argument("action", choices=["retry"], help="retry: parked extraction jobs and failing embeddings, now")
    jobs.add_argument("--json", action="store_true")
