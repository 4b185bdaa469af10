"""Socket activation: the listening socket systemd passes as fd 3 (sd_listen_fds(3)).

Under activation systemd owns the socket file, its mode and its group (memoryd.socket); the
daemon only accepts on it.  Clients that connect before the daemon is ready wait in the
kernel's listen queue and are served once it is.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import MutableMapping

from memoryd.errors import StartupError
from memoryd.log import fields

log = logging.getLogger("memoryd.activation")

SD_LISTEN_FDS_START = 3
_VARIABLES = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


def take_listen_socket(environ: MutableMapping[str, str] | None = None) -> socket.socket | None:
    """The inherited listening socket, or None when not socket-activated.

    The LISTEN_* variables are removed either way, so nothing we might start inherits them.
    """
    env = os.environ if environ is None else environ
    pid, count = env.get("LISTEN_PID"), env.get("LISTEN_FDS")
    for name in _VARIABLES:
        env.pop(name, None)
    if pid is None or count is None:
        return None
    try:
        if int(pid) != os.getpid():
            return None  # meant for the process that started us, not for us
        fds = int(count)
    except ValueError:
        raise StartupError(f"invalid socket activation variables LISTEN_PID={pid!r} LISTEN_FDS={count!r}") from None
    if fds < 1:
        return None
    if fds > 1:
        raise StartupError(f"socket activation passed {fds} sockets; memoryd serves exactly one (check memoryd.socket)")
    return _listening_unix_socket(SD_LISTEN_FDS_START)


def _listening_unix_socket(fd: int) -> socket.socket:
    try:
        sock = socket.socket(fileno=fd)  # family and type are read from the fd itself
    except OSError as exc:
        raise StartupError(f"socket activation: fd {fd} is not a socket: {exc}") from None
    os.set_inheritable(fd, False)
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.close()
        # Callers are told apart by their peer credentials, which only Unix sockets carry.
        raise StartupError("socket activation: memoryd needs a Unix stream socket (ListenStream=/path)")
    if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        sock.close()
        raise StartupError("socket activation: fd 3 is not listening (memoryd.socket must not set Accept=yes)")
    log.info("activation.socket", extra=fields(socket=bound_name(sock)))
    return sock


def bound_name(sock: socket.socket) -> str:
    name = sock.getsockname()
    if isinstance(name, bytes):  # abstract namespace
        return "@" + name[1:].decode(errors="replace")
    return str(name)
