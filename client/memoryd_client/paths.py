"""Where the memoryd socket lives.

The daemon imports ``default_socket_path`` from here, so client and daemon can never disagree
about the default; this module is standard library only.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional, Tuple

#: Environment variables naming the socket, most specific first.
SOCKET_ENV_VARS = ("MEMORYD_SOCKET", "ASH_RPC_SOCKET")


def default_socket_path(environ: Optional[Mapping[str, str]] = None) -> str:
    """``$XDG_RUNTIME_DIR/memoryd/memoryd.sock``, else ``/tmp/memoryd-$UID/memoryd.sock``."""
    env = os.environ if environ is None else environ
    runtime_dir = env.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        return os.path.join(runtime_dir, "memoryd", "memoryd.sock")
    # A literal /tmp, not tempfile.gettempdir(): $TMPDIR often differs between the daemon's
    # service environment and its clients, and both sides must compute the same path.
    return f"/tmp/memoryd-{os.getuid()}/memoryd.sock"


def resolve_socket_path(explicit: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> str:
    """The socket to use: ``explicit``, else $MEMORYD_SOCKET, else $ASH_RPC_SOCKET, else the default."""
    return resolve_socket_path_with_origin(explicit, environ)[0]


def resolve_socket_path_with_origin(
    explicit: Optional[str] = None, environ: Optional[Mapping[str, str]] = None
) -> Tuple[str, str]:
    """Like ``resolve_socket_path``, plus where the path came from (for error messages)."""
    if explicit:
        return os.fspath(explicit), "passed explicitly"
    env = os.environ if environ is None else environ
    for name in SOCKET_ENV_VARS:
        value = env.get(name)
        if value:
            return value, f"from ${name}"
    return default_socket_path(env), "the default path"
