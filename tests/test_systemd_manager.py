"""The units under a real systemd: Type=notify, watchdog, socket activation and the full sandbox.

A private `systemd --user` runs in its own mount namespace (where a tmpfs on /run/systemd
makes it believe the host booted with systemd), so nothing on the host is touched.  Needs
root; skipped where that, unshare/nsenter or the systemd binary are missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

SYSTEMD = Path("/lib/systemd/systemd")
MEMORYD = Path(sys.executable).parent / "memoryd"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not SYSTEMD.exists() or not all(shutil.which(t) for t in ("unshare", "nsenter", "systemctl")),
    reason="needs root, unshare, nsenter and systemd to run a private service manager",
)

# Runs inside the new mount namespace, then becomes the manager (same pid).
_RIG = r"""
set -e
# A cgroup of its own: a user manager puts its units under its cgroup (minus init.scope), so two
# managers side by side (parallel test runs) shared app.slice/memoryd.service and stopping one's
# service stopped the other's.  $$ is the manager's pid (exec below).
for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
  if [ -w $h/cgroup.procs ]; then mkdir -p $h/memoryd-test-$$ && echo $$ > $h/memoryd-test-$$/cgroup.procs; fi
done
mount -n -t tmpfs tmpfs /run/systemd  # -n: no utab entry on the host
mkdir -p /run/systemd/system
# PID 1 normally provides these: sandboxing bind-mounts them over hidden paths.
i=/run/systemd/inaccessible
mkdir -p $i && mkdir -m 0 $i/dir && install -m 0 /dev/null $i/reg && mkfifo -m 0 $i/fifo
mknod -m 0 $i/chr c 0 0 && mknod -m 0 $i/blk b 0 0
python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('$i/sock')" && chmod 0 $i/sock
exec /lib/systemd/systemd --user
"""


class UserManager:
    def __init__(self, base: Path) -> None:
        # Not under /tmp (PrivateTmp=) nor a home (ProtectHome=): the services must see it.
        self.runtime = base / "runtime"
        self.runtime.mkdir(mode=0o700)
        self.units = self.runtime / "systemd" / "user"
        self.units.mkdir(parents=True)
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "XDG_RUNTIME_DIR": str(self.runtime), "HOME": str(base)}
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", _RIG],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while self.systemctl("is-system-running").stdout.strip() not in ("running", "degraded"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.skip("a private systemd user manager cannot run here")
            time.sleep(0.05)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = ["nsenter", "--mount", "--target", str(self.proc.pid), *args]
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60)

    def systemctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("systemctl", "--user", "--no-pager", *args)

    def show(self, unit: str, *properties: str) -> dict[str, str]:
        output = self.systemctl("show", unit, *(f"--property={name}" for name in properties)).stdout
        return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)

    def install(self, name: str, text: str, drop_in: str = "") -> None:
        (self.units / name).write_text(text)
        if drop_in:
            (self.units / f"{name}.d").mkdir(exist_ok=True)
            (self.units / f"{name}.d" / "test.conf").write_text("[Service]\n" + drop_in)
        assert self.systemctl("daemon-reload").returncode == 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the manager stops its units, then exits
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for hierarchy in ("/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
            _remove_cgroup(Path(hierarchy) / f"memoryd-test-{self.proc.pid}")


def _remove_cgroup(path: Path) -> None:
    """The rig's cgroup, innermost first (rmdir is how cgroups go; empty ones only)."""
    if not path.is_dir():
        return
    for inner, _, _ in sorted(os.walk(path), key=lambda entry: -len(entry[0])):
        try:
            os.rmdir(inner)
        except OSError:
            pass


@pytest.fixture
def manager() -> Iterator[UserManager]:
    base = Path(tempfile.mkdtemp(prefix="memoryd-test-", dir="/srv" if os.access("/srv", os.W_OK) else "/var/lib"))
    os.chmod(base, 0o755)
    instance = UserManager(base)
    yield instance
    instance.stop()
    shutil.rmtree(base, ignore_errors=True)


def _with_venv_memoryd(text: str) -> str:
    return re.sub(r"^ExecStart=\S+/memoryd ", f"ExecStart={MEMORYD} ", text, flags=re.MULTILINE)


def _interpreter_binds() -> str:
    """Show the service what it must run, read-only, where the sandbox hides it: the base
    interpreter may live in a home (pyenv), and a checkout (with its .venv and the editable
    install's sources) may live under /tmp, which PrivateTmp= replaces."""
    lines = []
    base = Path(sys.base_prefix).resolve()
    if base.parts[1] in ("root", "home"):
        lines += ["ProtectHome=tmpfs", f"BindReadOnlyPaths={base}"]
    for path in {Path(sys.prefix).resolve(), Path(__file__).resolve().parent.parent}:
        if path.parts[1] in ("tmp", "var") and path.parts[1:3] != ("var", "lib"):
            lines.append(f"BindReadOnlyPaths={path}")
        elif path.parts[1] in ("root", "home") and base.parts[1] not in ("root", "home"):
            lines += ["ProtectHome=tmpfs", f"BindReadOnlyPaths={path}"]
        elif path.parts[1] in ("root", "home"):
            lines.append(f"BindReadOnlyPaths={path}")
    return "".join(line + "\n" for line in lines)


def _call(path: Path, manager: UserManager, method: str, params: dict[str, Any]) -> Any:
    # The client runs outside the namespace: the socket lives on the real file system.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(60)
        client.connect(str(path))
        client.sendall(json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": 1}).encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = client.recv(65536)
            assert chunk, manager.systemctl("status", "memoryd.service").stdout
            reply += chunk
    return json.loads(reply)


def _add_and_search(path: Path, manager: UserManager) -> None:
    added = _call(path, manager, "memory.add", {"user_id": "u1", "content": "My cat Tiberius likes tuna"})
    assert added["result"]["embedded"] is True, added  # the local model ran inside the sandbox
    hits = _call(path, manager, "memory.search", {"user_id": "u1", "query": "what does my pet eat?"})
    assert [hit["id"] for hit in hits["result"]] == [added["result"]["id"]]


def _uids_seen_by(path: Path, uid: int) -> dict[str, int]:
    """system.health's connections_by_uid, asked by a child running as ``uid`` (group root)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child only drops privileges, makes one call and reports
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresuid(uid, uid, uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.settimeout(30)
                client.connect(str(path))
                client.sendall(b'{"jsonrpc": "2.0", "method": "system.health", "id": 1}\n')
                reply = b""
                while not reply.endswith(b"\n"):
                    reply += client.recv(65536)
            os.write(write_end, json.dumps(json.loads(reply)["result"]["server"]["connections_by_uid"]).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as results:
        seen = results.read()
    os.waitpid(pid, 0)
    return json.loads(seen) if seen else {}


def _assert_sandboxed_and_notifying(manager: UserManager, unit: str) -> None:
    state = manager.show(unit, "ActiveState", "SubState", "StatusText", "MainPID", "NRestarts", "Type")
    assert state["Type"] == "notify" and state["ActiveState"] == "active", state
    assert state["StatusText"].startswith("serving; "), state
    status = Path(f"/proc/{state['MainPID']}/status").read_text()
    assert re.search(r"^Seccomp:\s+2$", status, flags=re.MULTILINE)  # SystemCallFilter/MemoryDenyWriteExecute
    assert re.search(r"^NoNewPrivs:\s+1$", status, flags=re.MULTILINE)


def test_user_units_activate_on_the_first_client_and_run_sandboxed(manager: UserManager) -> None:
    data = manager.runtime.parent / "data"
    manager.install("memoryd.socket", (REPO / "systemd/user/memoryd.socket").read_text())
    manager.install(
        "memoryd.service",
        _with_venv_memoryd((REPO / "systemd/user/memoryd.service").read_text()),
        f"Environment=MEMORYD_DATA_DIR={data} MEMORYD_EMBEDDER=local\nStandardError=file:{data}.log\n",
    )
    assert manager.systemctl("start", "memoryd.socket").returncode == 0
    path = manager.runtime / "memoryd" / "memoryd.sock"
    assert manager.show("memoryd.service", "ActiveState")["ActiveState"] == "inactive"
    _add_and_search(path, manager)  # the first connection starts the service
    _assert_sandboxed_and_notifying(manager, "memoryd.service")


def test_system_service_sandbox_leaves_memoryd_working(manager: UserManager) -> None:
    """memoryd.service's hardening, as shipped, minus what a user manager cannot do (User=, %S)."""
    rig = manager.runtime.parent
    service = (REPO / "systemd/memoryd.service").read_text()
    service = re.sub(r"^(User|Group)=.*\n", "", _with_venv_memoryd(service), flags=re.MULTILINE)
    service = service.replace("--config /etc/memoryd/memoryd.toml", f"--config {rig}/config.toml")
    socket_unit = (REPO / "systemd/memoryd.socket").read_text()
    # %t is /run for the system manager: the socket shares the service's RuntimeDirectory=.
    socket_unit = socket_unit.replace("/run/memoryd/memoryd.sock", "%t/memoryd/memoryd.sock")
    socket_unit = socket_unit.replace("SocketGroup=memoryd", "SocketGroup=root")
    (rig / "config.toml").write_text('embedder = "local"\n')
    (rig / "data").mkdir()
    manager.install("memoryd.socket", socket_unit)
    manager.install(
        "memoryd.service",
        service,
        # In a user manager %S is in $HOME, which ProtectHome= hides: keep the data in the rig.
        f"Environment=MEMORYD_DATA_DIR={rig}/data\nStateDirectory=\nConfigurationDirectory=\n"
        f"ReadWritePaths={rig}/data\nStandardError=file:{rig}/memoryd.log\n" + _interpreter_binds(),
    )
    assert manager.systemctl("start", "memoryd.socket").returncode == 0
    path = manager.runtime / "memoryd" / "memoryd.sock"
    _add_and_search(path, manager)
    _assert_sandboxed_and_notifying(manager, "memoryd.service")
    # onnxruntime too runs under MemoryDenyWriteExecute=, ProcSubset=pid and the system call filter
    # (no silent fall back to numpy).
    embedder = _call(path, manager, "system.health", {})["result"]["embedder"]
    assert embedder["runtime"].startswith("onnxruntime "), (embedder, (rig / "memoryd.log").read_text(errors="replace"))
    properties = manager.show("memoryd.service", "MemoryDenyWriteExecute", "ProtectSystem", "ProtectHome")
    assert properties["MemoryDenyWriteExecute"] == "yes" and properties["ProtectSystem"] == "strict"

    # Peer uids reach the daemon unchanged (a user namespace would turn them into 65534),
    # so auth.trusted_uids keeps working.  The runtime dir is opened to group root for the peer.
    os.chmod(manager.runtime, 0o750)
    assert "4242" in _uids_seen_by(path, 4242)

    # Stopping the service keeps the runtime directory, so the socket stays and re-activates it.
    assert manager.systemctl("stop", "memoryd.service").returncode == 0
    assert path.is_socket()
    hits = _call(path, manager, "memory.search", {"user_id": "u1", "query": "tuna"})
    if "result" not in hits:
        print((rig / "memoryd.log").read_text(errors="replace"))  # shown with the failure
    assert len(hits.get("result", ())) == 1, hits
    assert manager.show("memoryd.service", "ActiveState")["ActiveState"] == "active"

    # The control: the same sandbox really refuses writable+executable memory.
    probe = f"{sys.executable} -c 'import mmap; mmap.mmap(-1, 4096, prot=7)'"
    manager.install(
        "memoryd-probe.service",
        re.sub(r"^ExecStart=.*$", f"ExecStart={probe}", service.replace("Type=notify", "Type=oneshot"), flags=re.M),
        f"StandardError=file:{rig}/probe.log\n" + _interpreter_binds(),
    )
    assert manager.systemctl("start", "memoryd-probe.service").returncode != 0
    assert "PermissionError" in (rig / "probe.log").read_text()


def test_a_frozen_daemon_is_restarted_by_the_watchdog(manager: UserManager) -> None:
    """WatchdogSec= with Restart=on-failure, as shipped: a daemon whose pings stop (frozen here
    with SIGSTOP, as a wedged event loop would be) is killed and started again, and serves."""
    data = manager.runtime.parent / "data"
    manager.install("memoryd.socket", (REPO / "systemd/user/memoryd.socket").read_text())
    manager.install(
        "memoryd.service",
        _with_venv_memoryd((REPO / "systemd/user/memoryd.service").read_text()),
        # Shorter than the shipped 60 s so the test is quick; the restart policy is the unit's own.
        f"Environment=MEMORYD_DATA_DIR={data} MEMORYD_EMBEDDER=none\nWatchdogSec=2\nRestartSec=0.2\n"
        f"TimeoutAbortSec=2\nStandardError=file:{data}.log\n",
    )
    assert manager.systemctl("start", "memoryd.socket").returncode == 0
    path = manager.runtime / "memoryd" / "memoryd.sock"
    added = _call(path, manager, "memory.add", {"user_id": "u1", "content": "kept across the restart"})
    assert "result" in added, added
    # Serving and pinging for longer than WatchdogSec: the pings arrive.
    time.sleep(3)
    before = manager.show("memoryd.service", "MainPID", "NRestarts", "ActiveState")
    assert before["ActiveState"] == "active" and before["NRestarts"] == "0", before
    os.kill(int(before["MainPID"]), signal.SIGSTOP)
    deadline = time.monotonic() + 30
    while True:
        after = manager.show("memoryd.service", "MainPID", "NRestarts", "ActiveState", "SubState")
        if after["NRestarts"] != "0" and after["ActiveState"] == "active" and after["SubState"] == "running":
            break
        assert time.monotonic() < deadline, (after, manager.systemctl("status", "memoryd.service").stdout)
        time.sleep(0.2)
    assert after["MainPID"] != before["MainPID"]
    hits = _call(path, manager, "memory.list", {"user_id": "u1"})
    assert [hit["content"] for hit in hits["result"]] == ["kept across the restart"]
