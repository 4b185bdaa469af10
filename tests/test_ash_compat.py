"""ash's sandbox CLI, pointed at memoryd, works unchanged.

``AshSandboxClient`` speaks exactly what ash's ``ash_sandbox_cli`` speaks: a blocking socket per
call, one request per connection, ``struct.pack("!I", len) + json.dumps(request)``, a reply read
as 4 length bytes then the payload; params carry ``context_token`` and the routing fields (None
when the env var is unset), and the results are consumed the way its memory commands do
(bare lists, ``r["similarity"]``, ``r["metadata"].get(...)``, ``result["id"]``,
``result["deleted"]``).  ``search`` and ``list`` send ``this_chat`` (ash's ``--this-chat``).
"""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.server.daemon import Daemon
from memoryd_client import mint_token
from tests.conftest import make_config

SECRET = "9c" * 32

# What ash's sandbox environment provides; ASH_USER_ID may be absent when only a token is set.
ROUTING_ENV = {
    "chat_type": "group",
    "provider": "telegram",
    "thread_id": "42",
    "session_key": "telegram_team_alice",
    "message_id": "m-1",
    "source_username": "alice",
    "source_display_name": "Alice",
    "username": "alice",
    "current_user_message": "remember that I like tea",
    "timezone": "Europe/Vienna",
    "chat_title": "Team",
}


class AshRpcError(Exception):
    def __init__(self, code: int, message: str, data: Any) -> None:
        super().__init__(message)
        self.code, self.data = code, data


class AshSandboxClient:
    """The wire behaviour of ash's sandbox CLI (``rpc_call`` + ``get_context_params``)."""

    def __init__(self, socket_path: Path, env: dict[str, str | None], routing: dict[str, Any] | None = None) -> None:
        self.socket_path = str(socket_path)
        self.env = env
        self.routing = {**ROUTING_ENV, **(routing or {})}
        self.connections = 0
        self.rows: list[str] = []

    def context_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "user_id": self.env.get("ASH_USER_ID"),
            "chat_id": self.env.get("ASH_CHAT_ID"),
            "context_token": self.env.get("ASH_CONTEXT_TOKEN"),
        }
        params.update(self.routing)
        return params

    def rpc_call(self, method: str, params: dict[str, Any]) -> Any:
        request = {"jsonrpc": "2.0", "method": method, "params": params, "id": 1}
        payload = json.dumps(request).encode()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        try:
            sock.connect(self.socket_path)
            self.connections += 1
            sock.sendall(struct.pack("!I", len(payload)) + payload)
            data = self._read_message(sock)
        finally:
            sock.close()
        assert data is not None, "connection closed by server"
        response = json.loads(data)
        assert response["jsonrpc"] == "2.0" and response["id"] == 1
        if "error" in response:
            error = response["error"]
            raise AshRpcError(error["code"], error["message"], error.get("data"))
        return response["result"]

    @staticmethod
    def _read_message(sock: socket.socket) -> bytes | None:
        # ash reads the header with a single recv(4): the reply must not dribble out.
        header = sock.recv(4)
        if len(header) < 4:
            return None
        (length,) = struct.unpack("!I", header)
        data = b""
        while len(data) < length:
            chunk = sock.recv(length - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    # -- ash's memory commands, as they build params and read results ---------------------

    def search(self, query: str, limit: int = 10, this_chat: bool = False) -> list[str]:
        params = {"query": query, "limit": limit, "this_chat": this_chat, **self.context_params()}
        results = self.rpc_call("memory.search", params)
        assert isinstance(results, list)
        lines = []
        for r in results:
            parts = [f"[{r.get('similarity', 0):.2f}]"]
            memory_type = r.get("metadata", {}).get("memory_type", "")
            if memory_type:
                parts.append(f"({memory_type})")
            if r.get("source", ""):
                parts.append(f"[{r['source']}]")
            parts.append(r.get("content", ""))
            lines.append(" ".join(parts))
        return lines

    def list_memories(self, limit: int = 20, this_chat: bool = False) -> list[dict[str, Any]]:
        memories = self.rpc_call("memory.list", {"limit": limit, "this_chat": this_chat, **self.context_params()})
        assert isinstance(memories, list)
        # The fields ash's table reads, with its defaults: each must have the expected type.
        self.rows = [
            f"{m.get('id', '?')[:8]:<10} {m.get('memory_type', '-')[:10]:<12} {m.get('source', '-')[:12]:<14} "
            f"{', '.join(m.get('about', []))[:14] or '-':<16} {m.get('content', '')[:40]}"
            for m in memories
        ]
        return memories

    def add(
        self, content: str, *, shared: bool = False, expires: int | None = None, subject: list[str] | None = None
    ) -> str:
        params: dict[str, Any] = {"content": content, "source": "agent", "shared": shared, **self.context_params()}
        if expires is not None:
            params["expires_days"] = expires
        if subject:
            params["subjects"] = subject
        result = self.rpc_call("memory.add", params)
        memory_id: str = result.get("id", "unknown")
        return memory_id

    def delete(self, memory_id: str) -> bool:
        result = self.rpc_call("memory.delete", {"memory_id": memory_id, **self.context_params()})
        return bool(result.get("deleted"))


async def start(short_tmp: Path, nursery: trio.Nursery, **auth: Any) -> Daemon:
    instance = Daemon(make_config(short_tmp, auth=auth) if auth else make_config(short_tmp))
    await nursery.start(instance.run)
    return instance


async def in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    # ash's client blocks; run it off the event loop that serves it.
    return await trio.to_thread.run_sync(lambda: fn(*args, **kwargs))


@pytest.mark.parametrize("with_user_env", [True, False], ids=["ASH_USER_ID set", "token only"])
async def test_ash_cli_works_unchanged_in_token_mode(
    short_tmp: Path, nursery: trio.Nursery, with_user_env: bool
) -> None:
    daemon = await start(short_tmp, nursery, mode="token", token_secret=SECRET)
    env: dict[str, str | None] = {
        "ASH_CONTEXT_TOKEN": mint_token(SECRET, "alice", "team"),
        "ASH_CHAT_ID": "team" if with_user_env else None,
        "ASH_USER_ID": "alice" if with_user_env else None,
    }
    ash = AshSandboxClient(daemon.config.socket_path, env)
    first = await in_thread(ash.add, "Alice likes green tea", subject=["Alice"])
    shared = await in_thread(ash.add, "The team stand-up is at 9:30", shared=True, expires=30)
    assert len(first) == 26 and len(shared) == 26
    lines = await in_thread(ash.search, "green tea")
    assert lines and lines[0].endswith("[agent] Alice likes green tea") and lines[0].startswith("[")
    listed = await in_thread(ash.list_memories)
    assert [m["id"] for m in listed] == [shared, first]
    assert {"id", "content", "source", "created_at", "expires_at"} <= set(listed[0])
    hits = await in_thread(ash.rpc_call, "memory.search", {"query": "stand-up", **ash.context_params()})
    assert {"id", "content", "similarity", "source", "metadata"} <= set(hits[0])
    assert await in_thread(ash.delete, first) is True
    assert await in_thread(ash.delete, first) is False
    assert [m["id"] for m in await in_thread(ash.list_memories)] == [shared]
    assert ash.connections == 8  # one request per connection


async def test_ash_delete_accepts_the_eight_character_id_it_prints(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon = await start(short_tmp, nursery, mode="token", token_secret=SECRET)
    ash = AshSandboxClient(daemon.config.socket_path, {"ASH_CONTEXT_TOKEN": mint_token(SECRET, "alice")})
    memory_id = await in_thread(ash.add, "only memory")
    await in_thread(ash.list_memories)
    printed = ash.rows[0].split()[0]  # the id column of ash's `memory list`
    assert printed == memory_id[:8]
    assert await in_thread(ash.delete, printed) is True


async def test_ash_cli_with_another_users_id_is_refused(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon = await start(short_tmp, nursery, mode="token", token_secret=SECRET)
    env: dict[str, str | None] = {"ASH_CONTEXT_TOKEN": mint_token(SECRET, "alice"), "ASH_USER_ID": "bob"}
    ash = AshSandboxClient(daemon.config.socket_path, env)
    with pytest.raises(AshRpcError) as caught:
        await in_thread(ash.list_memories)
    assert caught.value.code == -32002 and caught.value.data["field"] == "user_id"
    # ash prints "Error: <message>": the message must say why on its own.
    assert "user_id" in str(caught.value)


async def test_ash_cli_works_in_trust_mode_with_its_user_env(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon = await start(short_tmp, nursery)
    env: dict[str, str | None] = {"ASH_USER_ID": "alice", "ASH_CHAT_ID": "team", "ASH_CONTEXT_TOKEN": "host-token"}
    ash = AshSandboxClient(daemon.config.socket_path, env)
    memory_id = await in_thread(ash.add, "trust mode fact")
    assert [m["id"] for m in await in_thread(ash.list_memories)] == [memory_id]
    assert await in_thread(ash.delete, memory_id) is True


async def test_errors_reach_ash_in_its_framing(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon = await start(short_tmp, nursery, mode="token", token_secret=SECRET)
    ash = AshSandboxClient(daemon.config.socket_path, {"ASH_CONTEXT_TOKEN": "expired.or.garbage"})
    with pytest.raises(AshRpcError) as caught:
        await in_thread(ash.search, "anything")
    assert caught.value.code == -32002 and caught.value.data["field"] == "context_token"
    with pytest.raises(AshRpcError) as unknown:
        await in_thread(ash.rpc_call, "memory.nonexistent", {"shared": False, **ash.context_params()})
    assert unknown.value.code == -32601
    # ash's `memory extract` with extraction off: the dedicated code, naming the settings, once
    # the token is good (a bad one is refused first, like every call's).
    with pytest.raises(AshRpcError) as refused:
        await in_thread(ash.rpc_call, "memory.extract", {"shared": False, **ash.context_params()})
    assert refused.value.code == -32002
    ash.env["ASH_CONTEXT_TOKEN"] = mint_token(SECRET, "alice", "team")
    with pytest.raises(AshRpcError) as off:
        await in_thread(ash.rpc_call, "memory.extract", {"shared": False, **ash.context_params()})
    assert off.value.code == -32008 and "[llm]" in str(off.value)


async def test_ash_memory_extract_reads_the_session_the_host_observed(short_tmp: Path, nursery: trio.Nursery) -> None:
    from tests.fake_llm import Answer, FakeLlm

    fact = {"content": "Alice likes tea.", "memory_type": "preference", "confidence": 0.9}
    with FakeLlm() as fake:
        fake.default = Answer({"facts": [fact]})
        llm = {"provider": "openai", "url": fake.url, "model": "fake-model", "retries": 0}
        daemon = Daemon(make_config(short_tmp, llm=llm, extraction={"debounce_seconds": 3600}))
        await nursery.start(daemon.run)
        env: dict[str, str | None] = {"ASH_USER_ID": "alice", "ASH_CHAT_ID": "team"}
        ash = AshSandboxClient(daemon.config.socket_path, env)
        # The host posts the exchange (its routing fields: session_key, message id "m-1").
        observed = await in_thread(
            ash.rpc_call,
            "memory.observe",
            {
                **ash.context_params(),
                "messages": [{"role": "user", "content": "remember that I like tea", "id": "m-1"}],
            },
        )
        assert observed == {"accepted": 1}
        # What ash's `memory extract` sends: only its routing fields and shared.
        result = await in_thread(ash.rpc_call, "memory.extract", {"shared": False, **ash.context_params()})
        assert result["stored"] == 1
        (memory,) = await in_thread(ash.list_memories)
        assert memory["content"] == "Alice likes tea." and memory["source_session"] == "telegram_team_alice"
        assert memory["source_message_id"] == "m-1" and memory["chat_type"] == "group"


# -- ash's disclosure rules, end to end ------------------------------------------------------------


def ash_session(daemon: Daemon, chat_id: str, chat_type: str | None, **routing: Any) -> AshSandboxClient:
    """What ash hands a sandbox serving Alice in ``chat_id``: a token with the routing claims, and
    the same values in its env (ASH_CHAT_TYPE, ASH_SOURCE_USERNAME, ...)."""
    speaker = {"source_username": "alice", "source_display_name": "Alice", "message_id": f"{chat_id}-m1", **routing}
    token = mint_token(SECRET, "alice", chat_id, chat_type=chat_type, **speaker)
    env: dict[str, str | None] = {"ASH_CONTEXT_TOKEN": token, "ASH_USER_ID": "alice", "ASH_CHAT_ID": chat_id}
    return AshSandboxClient(daemon.config.socket_path, env, {"chat_type": chat_type, **speaker})


async def test_a_private_chat_memory_never_reaches_a_group_chat(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon = await start(short_tmp, nursery, mode="token", token_secret=SECRET)
    dm = ash_session(daemon, "dm-alice", "private")
    group = ash_session(daemon, "team", "group")
    secret_id = await in_thread(dm.add, "Alice's blood test results are due Friday")
    assert [
        line.endswith("[Alice] Alice's blood test results are due Friday")
        for line in await in_thread(dm.search, "blood test")
    ] == [True]

    # From the group: search, list, get and delete all act as if it did not exist.
    assert await in_thread(group.search, "blood test results") == []
    assert secret_id not in [m["id"] for m in await in_thread(group.list_memories, 100)]
    with pytest.raises(AshRpcError) as hidden:
        await in_thread(group.rpc_call, "memory.get", {"memory_id": secret_id, **group.context_params()})
    assert hidden.value.code == -32001
    assert await in_thread(group.delete, secret_id[:8]) is False

    # A sandbox in the group cannot talk its way into the private chat.
    with pytest.raises(AshRpcError) as lied:
        await in_thread(
            group.rpc_call, "memory.search", {**group.context_params(), "chat_type": "private", "query": "blood"}
        )
    assert lied.value.code == -32002 and lied.value.data == {
        "field": "chat_type",
        "reason": "chat_type does not match the context token",
        "code": "mismatch",
    }
    # A token naming the chat but not its type counts as a group; the param cannot change that.
    vague = AshSandboxClient(
        daemon.config.socket_path, {"ASH_CONTEXT_TOKEN": mint_token(SECRET, "alice", "team")}, {"chat_type": "private"}
    )
    assert await in_thread(vague.search, "blood test") == []
    # Back in the private chat it is all still there.
    assert [m["id"] for m in await in_thread(dm.list_memories)] == [secret_id]
    assert await in_thread(dm.delete, secret_id[:8]) is True


async def test_what_alice_said_in_a_group_is_shown_in_her_private_chat(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon = await start(short_tmp, nursery, mode="token", token_secret=SECRET)
    dm = ash_session(daemon, "dm-alice", "private")
    group = ash_session(daemon, "team", "supergroup")
    said_in_group = await in_thread(group.add, "Alice runs a marathon in April")
    about_bob = await in_thread(group.add, "Bob is allergic to peanuts", subject=["Bob"])
    sensitive = await in_thread(
        group.rpc_call,
        "memory.add",
        {"content": "Alice's salary is 90k", "sensitivity": "sensitive", **group.context_params()},
    )
    assert sensitive["sensitivity"] == "sensitive"

    in_dm = {m["id"]: m for m in await in_thread(dm.list_memories)}
    assert set(in_dm) == {said_in_group, about_bob, sensitive["id"]}
    in_group = {m["id"]: m for m in await in_thread(group.list_memories)}
    assert set(in_group) == {said_in_group, about_bob}  # sensitive: private chats only
    assert (await in_thread(dm.search, "marathon"))[0].endswith("[Alice] Alice runs a marathon in April")

    # ash's list columns: type, source (the speaker), about; and its trust.
    marathon, bob = in_dm[said_in_group], in_dm[about_bob]
    assert (marathon["memory_type"], marathon["source"], marathon["about"], marathon["trust"]) == (
        "knowledge",
        "Alice",
        [],
        "fact",
    )
    assert (bob["about"], bob["trust"], bob["source_label"]) == (["Bob"], "hearsay", "agent")
    assert (marathon["chat_id"], marathon["chat_type"], marathon["source_message_id"]) == (
        "team",
        "supergroup",
        "team-m1",
    )
    hits = await in_thread(dm.rpc_call, "memory.search", {"query": "peanuts", **dm.context_params()})
    assert (hits[0]["trust"], hits[0]["about"], hits[0]["memory_type"]) == ("hearsay", ["Bob"], "knowledge")

    # --this-chat: only what was learned in the current chat.
    assert await in_thread(dm.list_memories, 20, True) == []
    assert {m["id"] for m in await in_thread(group.list_memories, 20, True)} == {said_in_group, about_bob}


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("memory.list", {"limit": 0}, "limit"),
        ("memory.search", {"query": "tea", "limit": 101}, "limit"),
        ("memory.search", {"query": "tea", "limit": 0}, "limit"),
        ("memory.list", {"limit": -1}, "limit"),
    ],
)
async def test_limits_ash_does_not_check_get_a_clear_invalid_params(
    short_tmp: Path, nursery: trio.Nursery, method: str, params: dict[str, Any], field: str
) -> None:
    daemon = await start(short_tmp, nursery, mode="token", token_secret=SECRET)
    ash = ash_session(daemon, "team", "group")
    with pytest.raises(AshRpcError) as caught:
        await in_thread(ash.rpc_call, method, {**params, **ash.context_params()})
    assert caught.value.code == -32602 and caught.value.data["field"] == field
    assert field in str(caught.value)  # ash prints only the message


async def test_context_and_people_keep_a_private_chat_memory_out_of_the_group(
    short_tmp: Path, nursery: trio.Nursery
) -> None:
    daemon = await start(short_tmp, nursery, mode="token", token_secret=SECRET)
    dm = ash_session(daemon, "dm-alice", "private")
    group = ash_session(daemon, "team", "group")
    secret = await in_thread(dm.add, "Sarah is pregnant with twins", subject=["Sarah"])
    public = await in_thread(group.add, "Sarah runs the Berlin office", subject=["Sarah"])

    def context(session: AshSandboxClient) -> dict[str, Any]:
        params = {"message": "what about Sarah?", **session.context_params()}
        result: dict[str, Any] = session.rpc_call("memory.context", params)
        return result

    in_group = await in_thread(context, group)
    assert [m["id"] for m in in_group["memories"]] == [public] and "pregnant" not in in_group["text"]
    assert {m["id"] for m in (await in_thread(context, dm))["memories"]} == {secret, public}
    person = await in_thread(group.rpc_call, "person.get", {"name": "Sarah", **group.context_params()})
    assert [m["id"] for m in person["memories"]] == [public]
