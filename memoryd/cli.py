"""The ``memoryd`` command: ``serve`` runs the daemon; the other subcommands are host-side tools."""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import msgspec

from memoryd.cli_parser import build_parser
from memoryd.config import Config, config_reference, load_config
from memoryd.errors import ConfigError, MemorydError, StartupError, lone_leaf
from memoryd.log import setup_logging

log = logging.getLogger("memoryd.cli")

#: Exit statuses (README "Limits and failure modes"); a StartupError carries its own:
#: 3 = the data dir or database cannot be created, opened or written (read-only, permissions,
#: full disk), 4 = the store is damaged or suspiciously empty and is not served.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    names = ("socket", "data_dir", "embedder", "log_level")
    return {name: getattr(args, name, None) for name in names}


def main(argv: Sequence[str] | None = None) -> int:
    # `memoryd serve`'s imports build ~70k long-lived objects the cyclic collector tracks
    # (functions, classes, dicts): its passes over them while they pile up cost ~40 ms of the
    # start and free nothing.  Off until the daemon's modules are in (``_serve``); every other
    # command gets it back at once.
    gc.disable()
    try:
        return _run(argv)
    finally:
        gc.enable()


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.command != "serve":
        gc.enable()
    try:
        config = load_config(config_file=args.config, flags=_flags(args))
    except ConfigError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    setup_logging(config.log_level, config.log_format)
    try:
        return _COMMANDS[args.command](config, args)
    except ConfigError as exc:
        # Found once the command needs it (a store's URL, say): a usage error like any other key.
        print(f"memoryd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StartupError as exc:
        # One line naming the path and the cause; the status tells systemd which kind.
        print(f"memoryd: cannot start: {exc}", file=sys.stderr)
        return exc.exit_status
    except MemorydError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE


def _serve(config: Config, args: argparse.Namespace) -> int:
    # Before the daemon's modules (~0.2 s of imports, trio's too): the integrity check of an
    # existing store and the local model's load run meanwhile (server/head_start.py).
    from memoryd.server.head_start import HeadStart

    head_start = HeadStart(config)
    import trio

    from memoryd.server.serve import run_until_signalled

    # What start-up imported lives as long as the process: kept out of every later collection.
    gc.freeze()
    gc.enable()
    try:
        trio.run(partial(run_until_signalled, config, accept_empty_db=args.accept_empty_db, head_start=head_start))
    except BaseExceptionGroup as group:
        # The daemon's nurseries wrap what stopped start-up; one error of ours is shown as itself.
        lone = lone_leaf(group)
        if not isinstance(lone, MemorydError):
            raise
        raise lone from None
    return EXIT_OK


def _reindex(config: Config, args: argparse.Namespace) -> int:
    import trio

    from memoryd.embed import make_embedder
    from memoryd.store import backends

    if config.embedder == "none":
        print("memoryd: reindex needs an embedder (--embedder local|ollama|openai)", file=sys.stderr)
        return EXIT_USAGE

    async def describe_target() -> tuple[str, int | None]:
        embedder = make_embedder(config.embedder, config.embed)
        try:
            await embedder.start()
            if embedder.dim is None:
                await embedder.embed(["dimension probe"])
            assert embedder.model_id is not None
            return embedder.model_id, embedder.dim
        finally:
            await embedder.aclose()

    model, dim = trio.run(describe_target)
    config.data_path.mkdir(mode=0o700, parents=True, exist_ok=True)
    store = backends.open_store(config, readers=1)
    try:
        store.request_reindex(model, dim)
    finally:
        store.close()
    print(
        f"Reindex to {model} (dim {dim}) recorded in {config.db_path}.\n"
        f"Restart the daemon with this embedder (e.g. `memoryd serve --embedder {config.embedder}`):\n"
        "it serves at once and re-embeds every memory in the background; until that finishes,\n"
        "search uses keywords plus the vectors already re-embedded, never the old vector space."
    )
    return EXIT_OK


def _token(config: Config, args: argparse.Namespace) -> int:
    from memoryd.auth.tokens import load_token_secret, mint_token, parse_ttl
    from memoryd_client.identifiers import identifier_problem

    try:
        ttl = parse_ttl(args.ttl)
    except ValueError as exc:
        print(f"memoryd: --ttl: {exc}", file=sys.stderr)
        return EXIT_USAGE
    secret = load_token_secret(config.auth)
    if secret is None:
        print(
            "memoryd: no token secret configured: set auth.token_secret_file "
            "(or MEMORYD_AUTH_TOKEN_SECRET_FILE / MEMORYD_AUTH_TOKEN_SECRET)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    for flag, value in (("--user", args.user), ("--chat", args.chat)):
        problem = None if value is None else identifier_problem(value)
        if problem is not None:
            print(f"memoryd: {flag} {problem} (see the identifier rule in docs/security.md)", file=sys.stderr)
            return EXIT_USAGE
    if config.auth.mode != "token":
        print('memoryd: note: auth.mode is "trust", so the daemon does not check tokens', file=sys.stderr)
    routing = {
        "chat_type": args.chat_type,
        "source_username": args.source_username,
        "source_display_name": args.source_display_name,
        "message_id": args.message_id,
    }
    print(mint_token(secret, args.user, args.chat, ttl, **routing))
    return EXIT_OK


def _config(config: Config, args: argparse.Namespace) -> int:
    if args.defaults:
        sys.stdout.write(config_reference())
        return EXIT_OK
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(_redacted(config)), indent=2).decode() + "\n")
    return EXIT_OK


def _redacted(config: Config) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(config)
    for section in ("embed", "llm"):
        if data[section].get("api_key"):
            data[section]["api_key"] = "***"
    if data["auth"].get("token_secret"):
        data["auth"]["token_secret"] = "***"
    if data["storage"].get("url"):
        from memoryd.store.connection_urls import redacted

        data["storage"]["url"] = redacted(data["storage"]["url"])
    # The paths actually used, not the empty "use the default" the file may hold.
    data["socket"] = str(config.socket_path)
    data["data_dir"] = str(config.data_path)
    data["effective"] = {"socket": str(config.socket_path), "database": str(config.db_path)}
    return data


_COMMANDS = {"serve": _serve, "reindex": _reindex, "token": _token, "config": _config}


def _quiet_admin_logs(args: argparse.Namespace) -> None:
    # The admin commands report on stdout/stderr themselves; info lines would only be noise.
    if args.log_level is None:
        logging.getLogger("memoryd").setLevel(logging.WARNING)


#: Admin subcommand -> (module in memoryd.admin, its run() keywords from the parsed args).
#: Imported on use, so `memoryd serve` does not load them.
_ADMIN_COMMANDS: dict[str, tuple[str, Callable[[argparse.Namespace], dict[str, Any]]]] = {
    "stats": ("stats", lambda args: {"as_json": args.json}),
    "gc": ("gc", lambda args: {"dry_run": args.dry_run, "as_json": args.json}),
    "export": ("export", lambda args: {"user": args.user}),
    "forget-user": (
        "forget_user",
        lambda args: {
            "user_id": args.user_id,
            "dry_run": args.dry_run,
            "include_group": args.include_group,
            "usernames": args.username,
            "as_json": args.json,
        },
    ),  # fmt: skip
    "import": ("importing", lambda args: {"path": args.file}),
    "backup": ("backup", lambda args: {"target": args.path, "force": args.force, "compact": args.compact}),
    "check": ("check", lambda args: {"repair": args.repair, "as_json": args.json}),
    "jobs": ("jobs", lambda args: {"action": args.action, "as_json": args.json}),
    "migrate": ("migrate", lambda args: {"to": args.to, "url": args.url}),
}


def _admin(config: Config, args: argparse.Namespace) -> int:
    module_name, keywords = _ADMIN_COMMANDS[args.command]
    module = importlib.import_module(f"memoryd.admin.{module_name}")
    _quiet_admin_logs(args)
    result: int = module.run(config, **keywords(args))
    return result


_COMMANDS.update(dict.fromkeys(_ADMIN_COMMANDS, _admin))
