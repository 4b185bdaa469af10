"""The `memory` command as a new user finds it: liveness without an identity, what `add` did,
history and observe, usage errors that name the subcommand and the bad value.  Through the
zipapp and a real daemon."""

from __future__ import annotations

import json
import re
from pathlib import Path

from memoryd.server.daemon import Daemon
from tests import test_cli_output
from tests.test_cli_output import SHORT_ID, Cli, out

# The CLI's fixture, shared with test_cli_output.py.
memory_pyz = test_cli_output.memory_pyz


def cli_for(pyz: Path, daemon: Daemon, **env: str) -> Cli:
    return Cli(pyz, {"MEMORYD_SOCKET": str(daemon.config.socket_path), **env})


async def test_health_and_version_need_no_identity(memory_pyz: Path, daemon: Daemon) -> None:
    anonymous = cli_for(memory_pyz, daemon)
    assert re.match(r"memoryd \S+: ok \(up \d+[smhd]\)\n", out(await anonymous("health")))
    assert json.loads(out(await anonymous("health", "--json")))["status"] == "ok"
    assert out(await anonymous("--version")).startswith("memory ")
    # Everything else still asks for one.
    refused = await anonymous("list")
    assert refused.returncode == 2 and b"MEMORY_USER_ID" in refused.stderr


async def test_add_says_what_it_replaced_and_when_it_only_refreshed(memory_pyz: Path, daemon: Daemon) -> None:
    cli = cli_for(memory_pyz, daemon, MEMORY_USER_ID="alice")
    first = out(await cli("add", "Bob lives in Lyon", "-S", "Bob"))
    old_id = re.fullmatch(rf"Memory added \(personal\): ({SHORT_ID})\n", first)
    assert old_id, first
    second = out(await cli("add", "Bob moved to Berlin; Bob lives in Berlin now", "-S", "Bob")).splitlines()
    assert re.fullmatch(rf"Memory added \(personal\): {SHORT_ID}", second[0]), second
    assert second[1:] == [f'replaced: {old_id.group(1)[:8]} "Bob lives in Lyon"'], second
    again = out(await cli("add", "Bob moved to Berlin; Bob lives in Berlin now", "-S", "Bob"))
    assert re.fullmatch(rf"Memory refreshed \(personal\): {SHORT_ID} \(already known, not added again\)\n", again), (
        again
    )
    assert (
        json.loads(out(await cli("add", "Bob moved to Berlin; Bob lives in Berlin now", "--json")))["deduplicated"]
        is True
    )


async def test_history_shows_the_versions_oldest_first(memory_pyz: Path, daemon: Daemon) -> None:
    cli = cli_for(memory_pyz, daemon, MEMORY_USER_ID="alice")
    old = json.loads(out(await cli("add", "Bob lives in Lyon", "-S", "Bob", "--json")))
    new = json.loads(out(await cli("add", "Bob moved to Berlin; Bob lives in Berlin now", "-S", "Bob", "--json")))
    assert new["superseded"] == [old["id"]]
    lines = out(await cli("history", new["id"][:10])).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{old['id'][:8]}  ") and "Bob lives in Lyon" in lines[0]
    assert f"(replaced by {new['id'][:8]}: " in lines[0]
    assert lines[1].startswith(f"{new['id'][:8]}  ") and lines[1].endswith("(current)")
    versions = json.loads(out(await cli("history", new["id"], "--json")))
    assert [v["id"] for v in versions] == [old["id"], new["id"]]
    missing = await cli("history", "0" * 26)
    assert missing.returncode == 1 and missing.stderr.decode().startswith("Error: ")


async def test_observe_posts_json_lines_from_stdin(memory_pyz: Path, daemon: Daemon) -> None:
    cli = cli_for(memory_pyz, daemon, MEMORY_USER_ID="alice", MEMORY_CHAT_ID="team")
    lines = [json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}) for i in range(150)]
    done = await cli("observe", stdin=("\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:]) + "\n").encode())
    assert out(done) == "Accepted 150 messages for extraction\n"
    assert json.loads(out(await cli("observe", "--json", stdin=lines[0].encode()))) == {"accepted": 1}
    not_json = await cli("observe", stdin=lines[0].encode() + b"\nnot json\n")
    assert not_json.returncode == 2 and not_json.stderr.decode().startswith("Error: stdin line 2: not JSON")
    empty = await cli("observe", stdin=b"")
    assert empty.returncode == 2 and b"no messages on stdin" in empty.stderr
    refused = await cli("observe", stdin=b'{"role": "robot", "content": "beep"}\n')
    assert refused.returncode == 1 and "messages[0].role" in refused.stderr.decode()


async def test_observed_messages_are_found_as_episodes_and_type_selects(memory_pyz: Path, daemon: Daemon) -> None:
    cli = cli_for(memory_pyz, daemon, MEMORY_USER_ID="alice", MEMORY_CHAT_ID="dm", MEMORY_CHAT_TYPE="private")
    said = json.dumps({"role": "user", "content": "We adopted a greyhound called Biscuit", "username": "alice"})
    assert out(await cli("observe", stdin=said.encode())) == "Accepted 1 message for extraction\n"
    fact = json.loads(out(await cli("add", "Biscuit the greyhound eats twice a day", "--json")))
    found = json.loads(out(await cli("search", "greyhound Biscuit", "--json")))
    assert {hit["memory_type"] for hit in found} == {"episode", "knowledge"}
    episodes = json.loads(out(await cli("search", "greyhound Biscuit", "-t", "episode", "--json")))
    assert [hit["memory_type"] for hit in episodes] == ["episode"]
    assert "We adopted a greyhound called Biscuit" in episodes[0]["content"]
    facts = json.loads(out(await cli("search", "greyhound Biscuit", "--type", "knowledge", "--json")))
    assert [hit["id"] for hit in facts] == [fact["id"]]
    # A user's list holds what they manage; episodes are listed when asked for.
    assert [m["id"] for m in json.loads(out(await cli("list", "--json")))] == [fact["id"]]
    assert [m["memory_type"] for m in json.loads(out(await cli("list", "-t", "episode", "--json")))] == ["episode"]


async def test_a_misplaced_flag_gets_the_subcommands_usage(memory_pyz: Path, daemon: Daemon) -> None:
    cli = cli_for(memory_pyz, daemon, MEMORY_USER_ID="alice")
    for args, usage in [
        (("add", "-n", "3", "tea"), "usage: memory add "),
        (("list", "--bogus"), "usage: memory list "),
        (("history", "ABCDEFGH", "-n", "2"), "usage: memory history "),
    ]:
        done = await cli(*args)
        assert done.returncode == 2 and done.stdout == b"", args
        stderr = done.stderr.decode()
        assert stderr.startswith(usage) and "unrecognized arguments" in stderr, (args, stderr)


async def test_a_value_out_of_the_daemons_range_is_a_usage_error(memory_pyz: Path, daemon: Daemon) -> None:
    cli = cli_for(memory_pyz, daemon, MEMORY_USER_ID="alice")
    for args, message in [
        (("search", "tea", "-n", "0"), "must be from 1 to 100"),
        (("search", "tea", "-n", "101"), "must be from 1 to 100"),
        (("list", "-n", "5000"), "must be from 1 to 1000"),
        (("context", "hi", "-n", "0"), "must be from 1 to 50"),
        (("context", "hi", "--max-chars", "5"), "must be from 100 to 100000"),
        (("add", "tea", "-e", "40000"), "must be at most 36500 days"),
    ]:
        done = await cli(*args)
        assert done.returncode == 2 and message in done.stderr.decode(), (args, done.stderr)
    # What only the daemon can judge is its message, status 1.
    done = await cli("add", "")
    assert (done.returncode, done.stderr.decode()) == (1, "Error: Invalid params: content: must not be empty\n")


async def test_payload_too_large_names_the_limit_and_the_size_sent(memory_pyz: Path, daemon: Daemon) -> None:
    cli = cli_for(memory_pyz, daemon, MEMORY_USER_ID="alice")
    limit = daemon.config.limits.max_message_bytes
    done = await cli("add", "-", stdin=b"x" * (limit + 1000))
    assert done.returncode == 1
    match = re.fullmatch(
        r"Error: Payload too large: the request was (\d+) bytes and the daemon accepts at most (\d+) bytes "
        r"per message \(limits\.max_message_bytes\)\n",
        done.stderr.decode(),
    )
    assert match, done.stderr
    assert int(match.group(1)) > limit + 1000 and int(match.group(2)) == limit
    assert out(await cli("list")).endswith("Total: 0\n")
