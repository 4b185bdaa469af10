"""Socket activation: `systemd-socket-activate` owns the socket and starts `memoryd serve` on demand."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.errors import StartupError
from memoryd.server.activation import take_listen_socket
from tests.conftest import REPO
from tests.wire import sync_call

ACTIVATOR = shutil.which("systemd-socket-activate")
needs_activator = pytest.mark.skipif(ACTIVATOR is None, reason="systemd-socket-activate is not installed")


class Activated:
    """`systemd-socket-activate -l PATH python -m memoryd serve ...`: execs the daemon on the first client."""

    def __init__(self, base: Path, *activator_flags: str) -> None:
        self.socket = base / "activated.sock"
        self.log_path = base / "activated.log"
        assert ACTIVATOR is not None
        args = [
            ACTIVATOR, "-l", str(self.socket), *activator_flags,
            # The activator passes only a few variables on: name what the daemon needs.
            "-E", "PYTHONPATH=" + str(REPO), "-E", "HOME",
            sys.executable, "-m", "memoryd", "serve",
            "--data-dir", str(base / "data"), "--embedder", "none",
        ]  # fmt: skip
        with open(self.log_path, "wb") as log_file:
            self.proc = subprocess.Popen(args, stderr=log_file, cwd=REPO)
        deadline = time.monotonic() + 20
        # Listening before anything runs.  The file appears at bind(), a moment before listen():
        # a connect in between is refused.  A probe connection would activate the daemon.
        while not _takes_clients(self.socket):
            assert self.proc.poll() is None, self.log()
            assert time.monotonic() < deadline, "the activator did not listen on its socket"
            time.sleep(0.01)

    def program(self) -> str:
        return os.path.basename(os.readlink(f"/proc/{self.proc.pid}/exe"))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


#: /proc/net/unix: a listening socket's flag (__SO_ACCEPTCON), and the stream type.
_ACCEPTING = 0x10000
_STREAM = 1


def _takes_clients(path: Path) -> bool:
    """Whether the socket bound to ``path`` takes clients (a stream one: listening), seen
    without connecting."""
    with open("/proc/net/unix") as table:
        next(table)  # Num RefCount Protocol Flags Type St Inode Path
        for line in table:
            fields = line.split()
            if len(fields) == 8 and fields[7] == str(path):
                if int(fields[4], 16) != _STREAM or int(fields[3], 16) & _ACCEPTING:
                    return True
    return False


@pytest.fixture
def activated(short_tmp: Path) -> Iterator[list[Activated]]:
    made: list[Activated] = []
    yield made
    for item in made:
        if item.proc.poll() is None:
            item.proc.kill()
            item.proc.wait()


@needs_activator
def test_clients_connecting_before_the_daemon_exists_are_served(short_tmp: Path, activated: list[Activated]) -> None:
    activation = Activated(short_tmp)
    activated.append(activation)
    assert activation.program() == "systemd-socket-activate"  # no daemon yet: nothing has connected
    clients = []
    for number in range(5):
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.settimeout(30)
        client.connect(str(activation.socket))  # queued by the kernel, not refused
        client.sendall(b'{"jsonrpc": "2.0", "method": "system.health", "id": %d}\n' % number)
        clients.append(client)
    for number, client in enumerate(clients):
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = client.recv(65536)
            assert chunk, activation.log()
            reply += chunk
        assert b'"status":"ok"' in reply and reply.endswith(b'"id":%d}\n' % number)
        client.close()
    assert activation.program().startswith("python")  # the same pid, exec'd into memoryd
    assert "activation.socket" in activation.log()


@needs_activator
def test_on_sigterm_the_daemon_leaves_the_socket_file_to_its_owner(short_tmp: Path, activated: list[Activated]) -> None:
    activation = Activated(short_tmp)
    activated.append(activation)
    inode = activation.socket.lstat().st_ino
    assert sync_call(activation.socket, "system.health")["result"]["status"] == "ok"
    activation.proc.send_signal(signal.SIGTERM)
    assert activation.proc.wait(30) == 0, activation.log()
    # systemd created it and keeps listening on it for the next start: not ours to unlink.
    assert activation.socket.lstat().st_ino == inode
    assert not list(short_tmp.glob(".activated.sock.*"))  # and no socket file of our own either


@needs_activator
def test_a_datagram_socket_is_refused_with_a_clear_message(short_tmp: Path, activated: list[Activated]) -> None:
    activation = Activated(short_tmp, "--datagram")
    activated.append(activation)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as poke:
        poke.sendto(b"wake up", str(activation.socket))  # a datagram starts the program
    assert activation.proc.wait(30) == 1
    assert "needs a Unix stream socket" in activation.log()


@needs_activator
def test_a_connection_passed_by_accept_mode_is_refused(short_tmp: Path, activated: list[Activated]) -> None:
    activation = Activated(short_tmp, "--accept")  # hands each child a connected socket
    activated.append(activation)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(30)
        client.connect(str(activation.socket))
        assert client.recv(1) == b""  # the child refused: the connection closes
    deadline = time.monotonic() + 20
    while "must not set Accept=yes" not in activation.log():  # its message follows the close
        assert time.monotonic() < deadline, activation.log()
        time.sleep(0.01)


def test_listen_variables_meant_for_another_process_are_ignored_and_removed() -> None:
    environ = {
        "LISTEN_PID": str(os.getpid() + 1),
        "LISTEN_FDS": "1",
        "LISTEN_FDNAMES": "memoryd.socket",
        "PATH": "/bin",
    }
    assert take_listen_socket(environ) is None
    assert environ == {"PATH": "/bin"}  # nothing we start inherits them


def test_without_listen_variables_the_daemon_binds_its_own_socket() -> None:
    assert take_listen_socket({}) is None


@pytest.mark.parametrize(
    ("fds", "message"),
    [("2", "exactly one"), ("many", "invalid socket activation variables")],
)
def test_unusable_listen_variables_stop_start_up(fds: str, message: str) -> None:
    with pytest.raises(StartupError, match=message):
        take_listen_socket({"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": fds})
