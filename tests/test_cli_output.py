"""The `memory` command as a sandbox runs it: the zipapp, a bare python3, identity from the environment."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from memoryd.server.daemon import Daemon
from memoryd_client import mint_token
from tests.conftest import REPO, make_config

# The interpreter a minimal image has: the system python3, with no site-packages (-S) and no
# PYTHON* variables or user site (-I), so only the standard library and the zipapp are there.
BARE_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
SECRET = "c3" * 32


@pytest.fixture(scope="module")
def memory_pyz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Built by the documented command."""
    target = tmp_path_factory.mktemp("dist") / "memory.pyz"
    subprocess.run(
        [sys.executable, "sandbox-cli/build_zipapp.py", "-o", str(target)], cwd=REPO, check=True, capture_output=True
    )
    yield target


class Cli:
    def __init__(self, pyz: Path, env: dict[str, str]) -> None:
        self.pyz = pyz
        self.env = env

    async def __call__(
        self, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        base = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "COLUMNS": "100", **self.env}
        return await trio.run_process(
            [BARE_PYTHON, "-I", "-S", str(self.pyz), *args],
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env={**base, **(env or {})},
        )


def out(done: subprocess.CompletedProcess[bytes]) -> str:
    assert done.returncode == 0, (done.returncode, done.stderr.decode())
    return done.stdout.decode()


@pytest.fixture
async def cli(memory_pyz: Path, daemon: Daemon) -> Cli:
    return Cli(
        memory_pyz,
        {"MEMORYD_SOCKET": str(daemon.config.socket_path), "MEMORY_USER_ID": "alice", "MEMORY_CHAT_ID": "team"},
    )


SHORT_ID = r"[0-9A-HJKMNP-TV-Z]{8,26}"


async def test_add_prints_the_scope_and_short_id(cli: Cli) -> None:
    personal = out(await cli("add", "Alice prefers green tea"))
    assert re.fullmatch(rf"Memory added \(personal\): {SHORT_ID}\n", personal), personal
    shared = out(await cli("add", "The team meets on Mondays", "--shared"))
    assert re.fullmatch(rf"Memory added \(shared\): {SHORT_ID}\n", shared), shared


async def test_add_options_reach_the_daemon_and_json_prints_the_result(cli: Cli) -> None:
    result = json.loads(
        out(
            await cli(
                "add",
                "Sarah is allergic to nuts",
                "-s",
                "user",
                "-e",
                "30",
                "-S",
                "Sarah",
                "--subject",
                "Kids",
                "--json",
            )
        )
    )
    assert result["scope"] == "personal" and result["expires_at"] and result["id"].startswith(result["short_id"])
    listed = json.loads(out(await cli("list", "--json")))
    assert [(m["source"], m["subjects"]) for m in listed] == [("user", ["Sarah", "Kids"])]
    assert json.loads(out(await cli("--json", "list"))) == listed  # --json before the subcommand too


async def test_chat_type_sensitivity_and_this_chat_reach_the_daemon(cli: Cli) -> None:
    private = {"MEMORY_CHAT_ID": "dm", "MEMORY_CHAT_TYPE": "private"}
    out(await cli("add", "my PIN hint is zebra", "--sensitivity", "sensitive", env=private))
    out(await cli("add", "the team likes zebras", env={"ASH_CHAT_TYPE": "group"}))
    in_dm = json.loads(out(await cli("search", "zebra", "--json", env=private)))
    assert {(m["sensitivity"], m["chat_type"]) for m in in_dm} == {("sensitive", "private"), (None, "group")}
    # In the group, the private-chat memory stays out; --this-chat keeps what was learned here.
    in_team = json.loads(out(await cli("list", "--json", env={"MEMORY_CHAT_TYPE": "group"})))
    assert [m["content"] for m in in_team] == ["the team likes zebras"]
    this_chat = json.loads(out(await cli("list", "--this-chat", "--json", env=private)))
    assert [m["content"] for m in this_chat] == ["my PIN hint is zebra"]
    assert "the team likes zebras" in out(await cli("search", "zebra", "--this-chat"))
    assert (await cli("add", "x", "--sensitivity", "secret")).returncode == 2


async def test_add_dash_reads_the_content_from_stdin(cli: Cli) -> None:
    text = "Notes from stdin: ünïcödé ✓\nsecond line"
    out(await cli("add", "-", stdin=text.encode() + b"\n"))
    [memory] = json.loads(out(await cli("list", "--json")))
    assert memory["content"] == text


async def test_search_prints_one_line_per_hit(cli: Cli) -> None:
    out(await cli("add", "Sarah loves Italian food\nespecially pasta", "-S", "Sarah", "-s", "user"))
    out(await cli("add", "Italian lessons on Thursday"))
    lines = out(await cli("search", "Italian food")).splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"\[(0|1)\.\d\d\] Sarah loves Italian food especially pasta \(about Sarah\) \[user\]", lines[0])
    assert re.fullmatch(r"\[(0|1)\.\d\d\] Italian lessons on Thursday \[agent\]", lines[1])
    assert out(await cli("search", "Italian", "-n", "1")).count("\n") == 1
    hits = json.loads(out(await cli("search", "Italian", "--json")))
    assert {"id", "content", "score", "similarity", "subjects", "scope"} <= set(hits[0])
    assert out(await cli("search", "submarine")) == "No memories found.\n"


async def test_list_is_a_table_cut_to_the_terminal_width(cli: Cli) -> None:
    out(await cli("add", "short one", "-S", "Bob"))
    out(await cli("add", "a very long memory " * 20, "--shared", "-s", "importer"))
    lines = out(await cli("list", env={"COLUMNS": "72"})).splitlines()
    assert lines[0].split() == ["ID", "AGE", "SCOPE", "ABOUT", "SOURCE", "CONTENT"]
    assert lines[-1] == "Total: 2"
    assert all(len(line) <= 72 for line in lines)
    newest, oldest = lines[1].split(), lines[2].split()
    assert re.fullmatch(SHORT_ID, newest[0]) and re.fullmatch(r"\d+s", newest[1])
    assert newest[2:5] == ["shared", "-", "importer"] and lines[1].endswith("...")
    assert oldest[2:6] == ["personal", "Bob", "agent", "short"]
    assert "a very long memory a very" in lines[1]


async def test_list_shows_expired_memories_only_when_asked(cli: Cli) -> None:
    out(await cli("add", "fleeting thought", "-e", "0.00000001"))  # ~1 ms
    out(await cli("add", "lasting thought"))
    await trio.sleep(0.01)
    assert out(await cli("list")).splitlines()[-1] == "Total: 1"
    lines = out(await cli("list", "--include-expired")).splitlines()
    assert lines[-1] == "Total: 2" and any("[expired] fleeting thought" in line for line in lines)
    assert out(await cli("list", "-n", "1", "--include-expired")).splitlines()[-1] == "Total: 1"


async def test_list_with_nothing_says_so(cli: Cli) -> None:
    assert out(await cli("list")) == "No memories found.\nTotal: 0\n"


async def test_delete_by_short_id_then_not_found(cli: Cli) -> None:
    added = json.loads(out(await cli("add", "delete me", "--json")))
    assert out(await cli("delete", added["short_id"].lower())) == f"Memory deleted: {added['short_id']}\n"
    again = await cli("delete", added["id"])
    assert again.returncode == 1 and again.stdout == b""
    assert again.stderr.decode() == "Memory not found or not owned by you\n"
    as_json = await cli("delete", added["id"], "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout) == {"deleted": False, "id": None}


async def test_another_users_memory_is_not_found(cli: Cli) -> None:
    bobs = json.loads(out(await cli("add", "bob's diary", "--json", env={"MEMORY_USER_ID": "bob"})))
    refused = await cli("delete", bobs["id"])
    assert refused.returncode == 1 and b"not found or not owned by you" in refused.stderr
    assert "bob's diary" not in out(await cli("search", "diary"))


async def test_rpc_errors_exit_1_with_the_message(cli: Cli) -> None:
    done = await cli("search", " ")
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode() == "Error: Invalid params: query: must not be empty\n"
    done = await cli("add", "")
    assert done.returncode == 1 and done.stderr.decode().startswith("Error: Invalid params: content:")
    done = await cli("delete", "0123")
    assert done.returncode == 1 and "memory_id" in done.stderr.decode()


async def test_health_prints_status_or_json(cli: Cli) -> None:
    assert re.match(r"memoryd \S+: ok \(up \d+[smhd]\)\n", out(await cli("health")))
    health = json.loads(out(await cli("health", "--json")))
    assert health["status"] == "ok" and "counts" in health


async def test_ash_environment_variables_work_too(cli: Cli, daemon: Daemon) -> None:
    env = {"ASH_RPC_SOCKET": str(daemon.config.socket_path), "ASH_USER_ID": "carol", "ASH_CHAT_ID": "team"}
    ash = Cli(cli.pyz, env)
    out(await ash("add", "carol's note"))
    [memory] = json.loads(out(await ash("list", "--json")))
    assert memory["owner"] == "carol"
    # MEMORY_* wins over ASH_*.
    out(await ash("add", "alice's note", env={"MEMORY_USER_ID": "alice"}))
    [memory] = json.loads(out(await ash("list", "--json", env={"MEMORY_USER_ID": "alice"})))
    assert (memory["owner"], memory["content"]) == ("alice", "alice's note")


async def test_a_token_alone_supplies_the_identity(memory_pyz: Path, short_tmp: Path, nursery: trio.Nursery) -> None:
    instance = Daemon(make_config(short_tmp, auth={"mode": "token", "token_secret": SECRET}))
    await nursery.start(instance.run)
    cli = Cli(
        memory_pyz,
        {"MEMORYD_SOCKET": str(instance.config.socket_path), "MEMORY_CONTEXT_TOKEN": mint_token(SECRET, "dave", "den")},
    )
    assert out(await cli("add", "shared via token", "--shared")).startswith("Memory added (shared): ")
    [memory] = json.loads(out(await cli("list", "--json")))
    assert (memory["owner"], memory["chat_id"]) == ("dave", "den")
    refused = await cli("list", env={"MEMORY_USER_ID": "erin"})
    assert refused.returncode == 1
    assert refused.stderr.decode() == "Error: Unauthorized: user_id does not match the context token\n"
    expired = await cli("list", env={"MEMORY_CONTEXT_TOKEN": mint_token(SECRET, "dave", ttl=60, now=1_000_000)})
    assert (expired.returncode, expired.stderr.decode()) == (1, "Error: Unauthorized: context token expired\n")


async def test_ashs_sandbox_environment_alone_is_enough(
    memory_pyz: Path, short_tmp: Path, nursery: trio.Nursery
) -> None:
    # What ash puts into a sandbox: its socket variable and its token variable, nothing else.
    instance = Daemon(make_config(short_tmp, auth={"mode": "token", "token_secret": SECRET}))
    await nursery.start(instance.run)
    ash_env = {
        "ASH_RPC_SOCKET": str(instance.config.socket_path),
        "ASH_CONTEXT_TOKEN": mint_token(SECRET, "fay", "den"),
    }
    cli = Cli(memory_pyz, ash_env)
    assert out(await cli("add", "fay's shared note", "--shared")).startswith("Memory added (shared): ")
    [memory] = json.loads(out(await cli("list", "--json")))
    assert (memory["owner"], memory["chat_id"], memory["scope"]) == ("fay", "den", "group")
    # MEMORY_CONTEXT_TOKEN wins over ASH_CONTEXT_TOKEN, as MEMORYD_SOCKET over ASH_RPC_SOCKET.
    other = {"MEMORY_CONTEXT_TOKEN": mint_token(SECRET, "gus"), "MEMORYD_SOCKET": str(instance.config.socket_path)}
    assert json.loads(out(await cli("list", "--json", env={**other, "ASH_RPC_SOCKET": "/nonexistent"}))) == []


def test_the_installed_console_script_is_the_same_command(memory_pyz: Path) -> None:
    # `pip install ./client ./sandbox-cli` installs this entry point as `memory`.
    with open(REPO / "sandbox-cli" / "pyproject.toml", "rb") as handle:
        assert tomllib.load(handle)["project"]["scripts"] == {"memory": "memory_cli.cli:main"}
    script = Path(sys.executable).parent / "memory"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, check=False)
    zipapp = subprocess.run([BARE_PYTHON, "-I", "-S", str(memory_pyz), "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == zipapp.stdout != ""
    unreachable = subprocess.run(
        [str(script), "list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "MEMORYD_SOCKET": "/nonexistent/memoryd.sock", "MEMORY_USER_ID": "alice"},
    )
    assert unreachable.returncode == 3 and "/nonexistent/memoryd.sock" in unreachable.stderr


async def test_missing_daemon_exits_3_naming_the_socket(memory_pyz: Path, short_tmp: Path) -> None:
    missing = short_tmp / "nowhere.sock"
    done = await Cli(memory_pyz, {"MEMORYD_SOCKET": str(missing), "MEMORY_USER_ID": "alice"})("list")
    assert done.returncode == 3 and done.stdout == b""
    assert str(missing) in done.stderr.decode() and "MEMORYD_SOCKET" in done.stderr.decode()
    not_listening = short_tmp / "stale.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(not_listening))
        done = await Cli(memory_pyz, {"MEMORYD_SOCKET": str(not_listening), "MEMORY_USER_ID": "alice"})("search", "x")
    assert done.returncode == 3 and "refused" in done.stderr.decode()


@pytest.mark.parametrize(
    "args",
    [[], ["frobnicate"], ["search"], ["list", "-n", "ten"], ["add"], ["add", "x", "-e", "-1"], ["list", "--bogus"]],
)
async def test_usage_errors_exit_2(memory_pyz: Path, args: list[str]) -> None:
    done = await Cli(memory_pyz, {"MEMORYD_SOCKET": "/nonexistent", "MEMORY_USER_ID": "alice"})(*args)
    assert done.returncode == 2 and done.stdout == b"" and b"usage: memory" in done.stderr


async def test_no_identity_is_a_usage_error(memory_pyz: Path) -> None:
    done = await Cli(memory_pyz, {"MEMORYD_SOCKET": "/nonexistent"})("list")
    assert done.returncode == 2 and b"MEMORY_CONTEXT_TOKEN" in done.stderr


async def test_version_and_help(memory_pyz: Path) -> None:
    cli = Cli(memory_pyz, {})
    assert re.fullmatch(r"memory \S+ \(memoryd-client \S+\)\n", out(await cli("--version")))
    help_text = out(await cli("--help"))
    for word in ("search", "add", "list", "delete", "health", "MEMORYD_SOCKET", "ASH_CONTEXT_TOKEN", "exit codes"):
        assert word in help_text
    assert "--shared" in out(await cli("add", "--help"))


def test_the_zipapp_build_is_reproducible(memory_pyz: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.pyz"
    subprocess.run(
        [sys.executable, "sandbox-cli/build_zipapp.py", "-o", str(again)], cwd=REPO, check=True, capture_output=True
    )
    assert again.read_bytes() == memory_pyz.read_bytes()
    assert memory_pyz.read_bytes().startswith(b"#!/usr/bin/env python3\n") and os.access(memory_pyz, os.X_OK)


async def test_pin_and_unpin_by_short_id(cli: Cli) -> None:
    added = json.loads(out(await cli("add", "keep this one", "--json")))
    assert out(await cli("pin", added["short_id"])) == f"Memory pinned: {added['short_id']}\n"
    assert json.loads(out(await cli("pin", added["id"], "--json")))["pinned"] is True
    assert out(await cli("unpin", added["short_id"])) == f"Memory unpinned: {added['short_id']}\n"
    refused = await cli("pin", added["id"], env={"MEMORY_USER_ID": "bob"})
    assert refused.returncode == 1 and "No memory visible to you" in refused.stderr.decode()


async def test_forget_all_needs_yes_then_erases(cli: Cli) -> None:
    out(await cli("add", "my secret hobby is knitting"))
    refused = await cli("forget-all")
    assert refused.returncode == 2 and "--yes" in refused.stderr.decode()
    assert "knitting" in out(await cli("search", "knitting"))
    assert out(await cli("forget-all", "--yes")) == "Erased: 1 memories\n"
    assert "knitting" not in out(await cli("search", "knitting"))
