"""``memory mcp --print-config CLIENT``: the settings snippet an MCP client needs to start the bridge.

The command is the one running now (the zipapp, the installed script, or ``python -m``), and
the environment is this shell's: the socket actually resolved, and the identity variables that
are set (a placeholder for the ones a setup needs but lacks), so the snippet can be pasted.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Dict, List, Mapping, Optional, Tuple

from memoryd_client import resolve_socket_path

CLIENTS = ("claude", "cursor", "codex")
#: Where each client reads the snippet (printed as a comment before it).
WHERE = {
    "claude": "Claude Code: .mcp.json in the project (or: claude mcp add-json memory '<the object under \"memory\">')",
    "cursor": "Cursor: ~/.cursor/mcp.json (all projects) or .cursor/mcp.json (one project)",
    "codex": "Codex: ~/.codex/config.toml",
}
IDENTITY_VARIABLES = ("MEMORY_CONTEXT_TOKEN", "MEMORY_USER_ID", "MEMORY_CHAT_ID", "MEMORY_CHAT_TYPE")


def bridge_command(argv0: Optional[str] = None, executable: Optional[str] = None) -> Tuple[str, List[str]]:
    """How to start ``memory mcp`` as this process was started."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = executable or sys.executable or "python3"
    path = os.path.abspath(argv0) if argv0 else ""
    if path.endswith("__main__.py"):
        return executable, ["-m", "memory_cli", "mcp"]
    if path.endswith(".pyz"):
        if os.access(path, os.X_OK):
            return path, ["mcp"]
        return executable, [path, "mcp"]
    if path and os.path.isfile(path):
        return path, ["mcp"]
    return "memory", ["mcp"]


def bridge_environment(environ: Mapping[str, str], socket_path: Optional[str] = None) -> Dict[str, str]:
    env = {"MEMORYD_SOCKET": resolve_socket_path(socket_path, environ)}
    for name in IDENTITY_VARIABLES:
        value = environ.get(name) or environ.get(name.replace("MEMORY_", "ASH_", 1))
        if value:
            env[name] = value
    if "MEMORY_CONTEXT_TOKEN" not in env and "MEMORY_USER_ID" not in env:
        env["MEMORY_USER_ID"] = "<your user id>"
    return env


def snippet(client: str, command: str, args: List[str], env: Dict[str, str]) -> str:
    if client == "codex":
        lines = [
            f"# {WHERE[client]}",
            "[mcp_servers.memory]",
            f"command = {_toml(command)}",
            f"args = [{', '.join(_toml(arg) for arg in args)}]",
            "",
            "[mcp_servers.memory.env]",
            *(f"{name} = {_toml(value)}" for name, value in env.items()),
        ]
        return "\n".join(lines) + "\n"
    server = {"command": command, "args": args, "env": env}
    if client == "claude":
        server = {"type": "stdio", **server}
    return json.dumps({"mcpServers": {"memory": server}}, indent=2, ensure_ascii=False) + "\n"


def _toml(text: str) -> str:
    # A TOML basic string uses JSON's escapes for the characters that need one.
    return json.dumps(text, ensure_ascii=False)


def print_config(client: str, socket_path: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> int:
    env = os.environ if environ is None else environ
    command, args = bridge_command()
    text = snippet(client, command, args, bridge_environment(env, socket_path))
    if client != "codex":
        print(f"// {WHERE[client]}", file=sys.stderr)
    sys.stdout.write(text)
    return 0
