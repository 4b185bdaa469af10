"""A real sandbox: the `memory` zipapp as another, unprivileged uid, holding only a token for Alice.

The daemon runs as root (the host) in token mode with ``trusted_uids = [0]``.  The "sandbox" is
a process switched by ``setpriv`` to uid/gid 65534 (nobody) with no supplementary groups and
no-new-privs.  It reaches the daemon only through the socket in a directory shared with it
(group nogroup, mode 0750; socket 0660); it cannot read the data directory.  Needs root and
setpriv; skipped otherwise.
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.server.daemon import Daemon
from memoryd_client import mint_token
from tests.conftest import REPO, make_config
from tests.wire import NdjsonPeer

SANDBOX_UID = SANDBOX_GID = 65534
BARE_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
SECRET = "7e" * 32

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run the CLI as another uid",
)


class Sandbox:
    """Runs commands as uid 65534 with a minimal environment: the socket and a token, nothing else."""

    def __init__(
        self, pyz: Path, socket_path: Path, token: str, uid: int = SANDBOX_UID, gid: int = SANDBOX_GID
    ) -> None:
        self.pyz = pyz
        self.uid, self.gid = uid, gid
        self.env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": "/nonexistent",
            "COLUMNS": "120",
            "MEMORYD_SOCKET": str(socket_path),
            "MEMORY_CONTEXT_TOKEN": token,
        }

    async def run(self, *command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        setpriv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--no-new-privs"]
        return await trio.run_process(
            [*setpriv, *command], capture_stdout=True, capture_stderr=True, check=False, env={**self.env, **(env or {})}
        )

    async def memory(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        return await self.run(BARE_PYTHON, "-I", "-S", str(self.pyz), *args, env=env)

    async def ok(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = await self.memory(*args, env=env)
        assert done.returncode == 0, (args, done.returncode, done.stderr.decode())
        return done.stdout.decode()

    async def refused(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = await self.memory(*args, env=env)
        assert done.returncode == 1, (args, done.returncode, done.stdout.decode(), done.stderr.decode())
        return done.stderr.decode()


def share_with_sandbox(base: Path) -> tuple[Path, dict[str, Any]]:
    """The socket directory the sandbox may enter, and the daemon's socket settings for it."""
    base.chmod(0o711)  # traverse only: the sandbox cannot list the host's directory
    run_dir = base / "run"
    run_dir.mkdir()
    try:
        group = grp.getgrgid(SANDBOX_GID).gr_name
    except KeyError:
        run_dir.chmod(0o711)
        return run_dir, {"socket_mode": "0666"}
    os.chown(run_dir, 0, SANDBOX_GID)
    run_dir.chmod(0o750)
    return run_dir, {"socket_mode": "0660", "socket_group": group}


@pytest.fixture
async def host(short_tmp: Path, nursery: trio.Nursery) -> Daemon:
    run_dir, socket_settings = share_with_sandbox(short_tmp)
    config = make_config(
        short_tmp,
        socket=str(run_dir / "memoryd.sock"),
        auth={"mode": "token", "token_secret": SECRET, "trusted_uids": [0]},
        **socket_settings,
    )
    instance = Daemon(config)
    await nursery.start(instance.run)
    return instance


@pytest.fixture
def pyz(short_tmp: Path) -> Path:
    bin_dir = short_tmp / "bin"
    bin_dir.mkdir(mode=0o755)
    target = bin_dir / "memory.pyz"
    subprocess.run(
        [sys.executable, "sandbox-cli/build_zipapp.py", "-o", str(target)], cwd=REPO, check=True, capture_output=True
    )
    return target


async def host_call(daemon: Daemon, method: str, params: dict[str, Any]) -> Any:
    """The host orchestrator (root, a trusted uid): no token needed."""
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    try:
        reply = await peer.call(method, params)
    finally:
        await peer.aclose()
    assert "result" in reply, reply
    return reply["result"]


async def test_a_sandboxed_tool_is_only_the_user_its_token_names(host: Daemon, pyz: Path, short_tmp: Path) -> None:
    # The host's data: Bob's personal memory, Bob's group memory in another chat, and Carol's
    # group memory in Alice's chat (which Alice may see).
    bob_personal = await host_call(host, "memory.add", {"user_id": "bob", "content": "bob's bank PIN hint: zebra"})
    bob_other_chat = await host_call(
        host,
        "memory.add",
        {"user_id": "bob", "chat_id": "chat-b", "shared": True, "content": "chat-b plans: zebra party"},
    )
    await host_call(
        host,
        "memory.add",
        {"user_id": "carol", "chat_id": "chat-a", "shared": True, "content": "chat-a standup at 9:30"},
    )

    sandbox = Sandbox(pyz, host.config.socket_path, mint_token(SECRET, "alice", "chat-a", ttl="15m"))

    # It really is another, unprivileged uid, and it cannot get at the database behind the socket.
    whoami = await sandbox.run(
        BARE_PYTHON, "-I", "-S", "-c", "import os; print(os.getuid(), os.getgid(), os.getgroups())"
    )
    assert whoami.stdout.decode().strip() == f"{SANDBOX_UID} {SANDBOX_GID} []", whoami.stderr
    peek = await sandbox.run(BARE_PYTHON, "-I", "-S", "-c", f"open({str(host.config.db_path)!r}, 'rb')")
    assert peek.returncode != 0 and b"PermissionError" in peek.stderr

    # Alice's tool adds, searches, lists and deletes its own memories.
    assert (await sandbox.ok("add", "alice paddles a red kayak", "-S", "Alice")).startswith("Memory added (personal): ")
    assert (await sandbox.ok("add", "chat-a retro on Friday", "--shared")).startswith("Memory added (shared): ")
    assert "alice paddles a red kayak (about Alice)" in await sandbox.ok("search", "kayak")
    listed = json.loads(await sandbox.ok("list", "--json"))
    assert sorted(m["content"] for m in listed) == [
        "alice paddles a red kayak",
        "chat-a retro on Friday",
        "chat-a standup at 9:30",
    ]
    assert (await sandbox.ok("list")).splitlines()[-1] == "Total: 3"
    kayak = next(m for m in listed if "kayak" in m["content"])
    assert (await sandbox.ok("delete", kayak["id"][:12])).startswith("Memory deleted: ")
    assert await sandbox.ok("search", "kayak") == "No memories found.\n"

    # Bob's memories and other chats stay invisible, whatever ids the tool claims.
    assert await sandbox.ok("search", "zebra") == "No memories found.\n"
    assert "zebra" not in await sandbox.ok("list", "--include-expired", "-n", "1000")
    for other in (bob_personal, bob_other_chat):
        assert await sandbox.refused("delete", other["id"]) == "Memory not found or not owned by you\n"
    for env in (
        {"MEMORY_USER_ID": "bob"},
        {"ASH_USER_ID": "bob"},
        {"MEMORY_USER_ID": "bob", "MEMORY_CHAT_ID": "chat-b"},
    ):
        for args in (("search", "zebra"), ("list",), ("delete", bob_personal["id"]), ("add", "planted by alice")):
            assert (await sandbox.refused(*args, env=env)).startswith("Error: Unauthorized: user_id does not match")
    assert "chat_id does not match" in await sandbox.refused("list", env={"MEMORY_CHAT_ID": "chat-b"})

    # Tokens it could make or keep are worthless: expired, forged, or none at all.
    expired = mint_token(SECRET, "alice", "chat-a", ttl=60, now=1_700_000_000)
    assert (
        await sandbox.refused("list", env={"MEMORY_CONTEXT_TOKEN": expired})
        == "Error: Unauthorized: context token expired\n"
    )
    forged = mint_token("guessed-secret-of-enough-length", "bob")
    assert "signature does not match" in await sandbox.refused("list", env={"MEMORY_CONTEXT_TOKEN": forged})
    assert "context token is required" in await sandbox.refused(
        "list", env={"MEMORY_CONTEXT_TOKEN": "", "MEMORY_USER_ID": "bob"}
    )

    # Health answers, but host-wide numbers are not the sandbox's business.
    assert set(json.loads(await sandbox.ok("health", "--json"))) == {"status", "version", "uptime_seconds"}

    # The host sees everything intact, and who connected.
    bobs = await host_call(host, "memory.list", {"user_id": "bob", "chat_id": "chat-b"})
    assert sorted(m["id"] for m in bobs) == sorted([bob_personal["id"], bob_other_chat["id"]])
    alices = await host_call(host, "memory.list", {"user_id": "alice", "chat_id": "chat-a"})
    assert sorted(m["content"] for m in alices) == ["chat-a retro on Friday", "chat-a standup at 9:30"]
    health = await host_call(host, "system.health", {})
    assert health["server"]["connections_by_uid"][str(SANDBOX_UID)] >= 20


async def test_only_the_shared_directory_lets_a_sandbox_in(host: Daemon, pyz: Path) -> None:
    socket_path = host.config.socket_path
    info = socket_path.stat()
    assert (info.st_mode & 0o777, info.st_gid) in ((0o660, SANDBOX_GID), (0o666, 0))
    token = mint_token(SECRET, "alice", "chat-a")
    assert (await Sandbox(pyz, socket_path, token).ok("list")).endswith("Total: 0\n")
    # A uid outside the socket's group cannot even connect: exit 3, naming the socket.
    stranger = await Sandbox(pyz, socket_path, token, uid=40000, gid=40000).memory("list")
    if info.st_mode & 0o777 == 0o660:
        assert stranger.returncode == 3 and str(socket_path) in stranger.stderr.decode()
        assert "permission denied" in stranger.stderr.decode()
