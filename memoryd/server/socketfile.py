"""The listening socket file: refuse a live daemon's, replace a stale one, appear only when ready.

The socket is bound under a temporary name, given its mode and group, and then renamed into
place, so a client never sees a half-set-up socket or one with the wrong permissions.
"""

from __future__ import annotations

import errno
import grp
import os
import socket
import stat
from pathlib import Path

from memoryd.errors import StartupError

# AF_UNIX paths are limited to 108 bytes on Linux, including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107


def check_not_in_use(path: Path) -> None:
    """Raise StartupError if a live daemon answers on ``path``; remove it if it is stale."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise StartupError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        path.unlink(missing_ok=True)  # stale: nobody listens
        return
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            path.unlink(missing_ok=True)
            return
        raise StartupError(f"cannot check socket {path}: {exc}") from None
    finally:
        probe.close()
    raise StartupError(
        f"another memoryd is already serving on {path}; stop it first, or pass --socket for a second one"
    )


def bind_socket_file(path: Path, *, mode: int, group: str, backlog: int = 128) -> socket.socket:
    """A listening AF_UNIX socket at ``path`` with ``mode`` and ``group``, published atomically."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise StartupError(f"socket path is longer than {MAX_SOCKET_PATH_BYTES} bytes: {path}")
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_not_in_use(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if len(os.fsencode(temporary)) > MAX_SOCKET_PATH_BYTES:
        temporary = path  # no room for the temporary name: bind in place (mode set before listen)
    temporary.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(temporary))
        os.chmod(temporary, mode)
        if group:
            try:
                gid = grp.getgrnam(group).gr_gid
            except KeyError:
                raise StartupError(f"socket_group {group!r} does not exist") from None
            os.chown(temporary, -1, gid)
        sock.listen(backlog)
        if temporary != path:
            os.rename(temporary, path)
    except OSError as exc:
        sock.close()
        temporary.unlink(missing_ok=True)
        raise StartupError(f"cannot create socket {path}: {exc}") from None
    except StartupError:
        sock.close()
        temporary.unlink(missing_ok=True)
        raise
    return sock


def socket_file_identity(path: Path) -> tuple[int, int]:
    info = path.lstat()
    return info.st_dev, info.st_ino


def remove_socket_file(path: Path, identity: tuple[int, int]) -> None:
    """Unlink ``path`` only if it is still our socket file (a newer daemon may have replaced it)."""
    try:
        if socket_file_identity(path) != identity:
            return
    except OSError:
        return
    path.unlink(missing_ok=True)
