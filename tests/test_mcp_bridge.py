"""`memory mcp` from the zipapp under a bare `python3 -I -S`, against a real daemon, driven by the
official MCP SDK's client (2026-07-28 and 2025-11-25) and over raw pipes (2025-06-18 and bad input)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client

from memory_cli.mcp.jsonschema import KNOWN_KEYWORDS
from memoryd.server.daemon import Daemon
from memoryd_client import mint_token
from tests.conftest import make_config
from tests.mcp_bridge import MODERN, RawBridge, bridge_argv, bridge_env, build_pyz, check_schema, sdk_client, validate

SECRET = "4d" * 32
TOOL_NAMES = {
    "remember",
    "recall",
    "context",
    "list_memories",
    "forget",
    "pin_memory",
    "unpin_memory",
    "forget_person",
    "forget_everything",
    "memory_history",
    "people",
}
WRITES = {"remember", "forget", "pin_memory", "unpin_memory", "forget_person", "forget_everything"}
DESTRUCTIVE = {"forget", "forget_person", "forget_everything"}
#: Destructive beyond one memory: these need confirm: true.
CONFIRMED = {"forget_person", "forget_everything"}


@pytest.fixture(scope="module")
def pyz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield build_pyz(tmp_path_factory.mktemp("dist"))


@pytest.fixture
async def token_daemon(short_tmp: Path, nursery: trio.Nursery) -> Daemon:
    """Token mode, and the test process is not trusted: every bridge needs its user's token."""
    instance = Daemon(make_config(short_tmp, auth={"mode": "token", "token_secret": SECRET}))
    await nursery.start(instance.run)
    return instance


def env_for(daemon: Daemon, user: str, chat: str = "team") -> dict[str, str]:
    return bridge_env(daemon.config.socket_path, MEMORY_CONTEXT_TOKEN=mint_token(SECRET, user, chat, ttl="1h"))


def schema_keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in a schema (property names are not keywords)."""
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for name, value in schema.items():
        if name == "properties":
            for sub in value.values():
                found |= schema_keywords(sub)
        elif name in ("items", "additionalProperties"):
            found |= schema_keywords(value)
    return found


class Checked:
    """Calls tools through the SDK client, holding every input and output to the tool's schemas."""

    def __init__(self, client: Client, tools: dict[str, dict[str, Any]]) -> None:
        self.client = client
        self.tools = tools

    @classmethod
    async def listing(cls, client: Client) -> Checked:
        listed = await client.list_tools()
        tools = {tool.name: tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools}
        return cls(client, tools)

    async def ok(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        validate(arguments, self.tools[name]["inputSchema"])
        result = await self.client.call_tool(name, arguments)
        assert not result.is_error, result
        assert result.content and result.content[0].type == "text" and result.content[0].text
        structured = result.structured_content
        assert isinstance(structured, dict)
        validate(structured, self.tools[name]["outputSchema"])
        return structured

    async def failed(self, name: str, arguments: dict[str, Any]) -> str:
        result = await self.client.call_tool(name, arguments)
        assert result.is_error, result
        text: str = result.content[0].text  # type: ignore[union-attr]
        return text


@pytest.mark.parametrize(("mode", "revision"), [("auto", MODERN), ("legacy", "2025-11-25")])
async def test_the_sdk_client_lists_and_uses_every_tool(
    token_daemon: Daemon, pyz: Path, mode: str, revision: str
) -> None:
    async with sdk_client(pyz, env_for(token_daemon, "alice"), mode) as client:
        assert client.protocol_version == revision
        checked = await Checked.listing(client)
        assert set(checked.tools) == TOOL_NAMES
        for name, tool in checked.tools.items():
            assert tool["description"] and len(tool["description"]) > 80, name
            for schema in (tool["inputSchema"], tool["outputSchema"]):
                check_schema(schema)
                assert schema["type"] == "object"
                assert schema_keywords(schema) <= KNOWN_KEYWORDS, (name, schema_keywords(schema) - KNOWN_KEYWORDS)
            # No tool lets the model say who the caller is.
            assert not {"user_id", "chat_id", "context_token", "token"} & set(tool["inputSchema"]["properties"]), name
            hints = tool["annotations"]
            assert hints["readOnlyHint"] is (name not in WRITES), name
            assert hints["destructiveHint"] is (name in DESTRUCTIVE), name
            if name in CONFIRMED:
                assert "confirm" in tool["inputSchema"]["required"], name
                assert tool["inputSchema"]["properties"]["confirm"]["const"] is True, name

        first = await checked.ok("remember", {"content": "The team standup is at 10:00", "shared": True})
        assert (first["status"], first["scope"], first["replaced"]) == ("added", "group", [])
        again = await checked.ok("remember", {"content": "The team standup is at 10:00", "shared": True})
        assert (again["status"], again["id"]) == ("refreshed", first["id"])
        sarah = await checked.ok(
            "remember", {"content": "Sarah is allergic to peanuts", "about": ["Sarah"], "expires_in_days": 30}
        )
        assert sarah["expires_at"]

        recalled = await checked.ok("recall", {"query": "peanuts allergy", "limit": 5})
        assert [m["content"] for m in recalled["memories"]] == ["Sarah is allergic to peanuts"]
        assert recalled["memories"][0]["about"] == ["Sarah"] and recalled["memories"][0]["score"] > 0
        assert "owner" not in recalled["memories"][0]
        context = await checked.ok("context", {"message": "What can I cook for Sarah? Any peanuts issue?"})
        assert "Sarah is allergic to peanuts" in context["text"]
        assert [p["name"] for p in context["people"]] == ["Sarah"]
        unrelated = {"message": "What is the capital of Mongolia?"}
        assert (await checked.ok("context", unrelated))["text"].startswith("About the user:")
        bare = await checked.ok("context", {**unrelated, "include_summary": False})
        assert (bare["text"], bare["summary"], bare["memories"]) == ("", "", [])
        said = await checked.client.call_tool("context", {**unrelated, "include_summary": False})
        assert said.content[0].type == "text" and said.content[0].text == "No memories found."
        listed = await checked.ok("list_memories", {"limit": 1})
        assert len(listed["memories"]) == 1 and listed["next_before_id"] == listed["memories"][0]["id"]
        older = await checked.ok("list_memories", {"before_id": listed["next_before_id"]})
        assert len(older["memories"]) == 1
        people = await checked.ok("people", {})
        assert [(p["name"], p["memory_count"]) for p in people["people"]] == [("Sarah", 1)]
        person = await checked.ok("people", {"name": "Sarah"})
        assert [m["content"] for m in person["person"]["memories"]] == ["Sarah is allergic to peanuts"]
        history = await checked.ok("memory_history", {"id": sarah["id"][:10]})
        assert [v["id"] for v in history["versions"]] == [sarah["id"]]

        forgotten = await checked.ok("forget", {"id": sarah["id"][:12]})
        assert forgotten == {"deleted": True, "id": sarah["id"]}
        assert (await checked.ok("recall", {"query": "peanuts allergy"}))["memories"] == []
        # The error path: the daemon's refusal reaches the model as a tool error it can read.
        assert "nothing was deleted" in await checked.failed("forget", {"id": sarah["id"]})
        assert "No memory visible to you" in await checked.failed("memory_history", {"id": sarah["id"]})
        assert "limit" in await checked.failed("recall", {"query": "x", "limit": 0})


async def test_pinning_and_forgetting_a_person_or_everything_through_the_sdk_client(
    token_daemon: Daemon, pyz: Path
) -> None:
    async with sdk_client(pyz, env_for(token_daemon, "alice", "alice-dm"), "auto") as alice_client:
        alice = await Checked.listing(alice_client)
        allergy = await alice.ok("remember", {"content": "I am allergic to penicillin", "expires_in_days": 5})
        assert allergy["expires_at"]
        pinned = await alice.ok("pin_memory", {"id": allergy["id"][:10]})
        assert pinned["pinned"] is True and pinned["memory"]["pinned"] is True
        assert pinned["memory"]["id"] == allergy["id"] and pinned["memory"]["expires_at"] is None
        listed = await alice.ok("list_memories", {})
        assert [m.get("pinned") for m in listed["memories"]] == [True]
        unpinned = await alice.ok("unpin_memory", {"id": allergy["id"]})
        assert unpinned["pinned"] is False and "pinned" not in unpinned["memory"]
        assert "No memory visible to you" in await alice.failed("pin_memory", {"id": "01JZZZZZZZZZZZZZZZZZZZZZZZ"})

        await alice.ok("remember", {"content": "Sarah loves jazz", "about": ["Sarah"]})
        await alice.ok("remember", {"content": "Sarah lives in Lyon", "about": ["Sarah"]})
        await alice.ok("remember", {"content": "Tom plays chess", "about": ["Tom"]})
        # Without confirm: true nothing is deleted, and the model is told to ask the user first.
        for arguments in ({"name": "Sarah"}, {"name": "Sarah", "confirm": False}, {"name": "Sarah", "confirm": "yes"}):
            refusal = await alice.failed("forget_person", arguments)
            assert "confirm: must be true" in refusal and "ask the user" in refusal, refusal
        assert {p["name"] for p in (await alice.ok("people", {}))["people"]} == {"Sarah", "Tom"}
        gone = await alice.ok("forget_person", {"name": "Sarah", "confirm": True})
        assert gone["person"]["name"] == "Sarah" and gone["person_deleted"] is True and len(gone["deleted"]) == 2
        assert [p["name"] for p in (await alice.ok("people", {}))["people"]] == ["Tom"]
        assert "Sarah" not in json.dumps(await alice.ok("recall", {"query": "Sarah jazz Lyon"}))
        assert "None of your people" in (await alice.failed("forget_person", {"name": "Sarah", "confirm": True}))

        for arguments in ({}, {"confirm": False}, {"include_group": True}):
            refusal = await alice.failed("forget_everything", arguments)
            assert "confirm: must be true" in refusal, refusal
        assert len((await alice.ok("list_memories", {}))["memories"]) == 2
        async with sdk_client(pyz, env_for(token_daemon, "bob", "bob-dm"), "auto") as bob_client:
            bob = await Checked.listing(bob_client)
            await bob.ok("remember", {"content": "Bob likes hiking"})
            erased = await alice.ok("forget_everything", {"confirm": True})
            # Every state counts: the two live ones, and Sarah's two that forget_person deleted.
            assert erased["erased"]["memories"] == 4 and erased["erased"]["people"] == 1
            assert erased["include_group"] is False
            assert (await alice.ok("list_memories", {}))["memories"] == []
            assert (await alice.ok("people", {}))["people"] == []
            # Another user's memories are untouched, and an erasure cannot be aimed at them.
            assert [m["content"] for m in (await bob.ok("list_memories", {}))["memories"]] == ["Bob likes hiking"]
            refusal = await alice.failed("forget_everything", {"confirm": True, "user_id": "bob"})
            assert "identity is never taken from tool arguments" in refusal
            assert len((await bob.ok("list_memories", {}))["memories"]) == 1


async def test_remember_takes_subjects_by_either_name_and_integers_written_as_floats(
    token_daemon: Daemon, pyz: Path
) -> None:
    """``subjects`` (memory.add's name) works as ``about`` does; ``5.0`` is an integer to JSON Schema."""
    async with sdk_client(pyz, env_for(token_daemon, "alice"), "auto") as client:
        checked = await Checked.listing(client)
        assert checked.tools["remember"]["inputSchema"]["properties"]["subjects"]["type"] == "array"
        await checked.ok("remember", {"content": "Sarah plays the violin", "subjects": ["Sarah"]})
        await checked.ok("remember", {"content": "Tom plays the drums", "about": ["Tom"]})
        people = await checked.ok("people", {})
        assert sorted((p["name"], p["memory_count"]) for p in people["people"]) == [("Sarah", 1), ("Tom", 1)]
        both = await checked.failed("remember", {"content": "x", "about": ["Sarah"], "subjects": ["Tom"]})
        assert "subjects" in both and "not both" in both
        found = await checked.ok("recall", {"query": "plays", "limit": 1.0})
        assert len(found["memories"]) == 1
        assert len((await checked.ok("list_memories", {"limit": 2.0}))["memories"]) == 2
        assert "limit: must be integer" in await checked.failed("recall", {"query": "plays", "limit": 1.5})


async def test_a_replaced_memory_is_reported_with_its_old_content(token_daemon: Daemon, pyz: Path) -> None:
    async with sdk_client(pyz, env_for(token_daemon, "alice"), "auto") as client:
        checked = await Checked.listing(client)
        old = await checked.ok("remember", {"content": "Alice lives in Lyon", "about": ["Alice"]})
        new = await checked.ok(
            "remember", {"content": "Alice moved to Berlin; Alice lives in Berlin now", "about": ["Alice"]}
        )
        assert new["replaced"] == [{"id": old["id"], "content": "Alice lives in Lyon"}]
        history = await checked.ok("memory_history", {"id": new["id"]})
        assert [v["id"] for v in history["versions"]] == [old["id"], new["id"]]
        assert history["versions"][0]["superseded_by"] == new["id"]


async def test_revision_2025_06_18_over_raw_pipes(token_daemon: Daemon, pyz: Path) -> None:
    async with RawBridge.open(pyz, env_for(token_daemon, "alice")) as bridge:
        reply = await bridge.initialize("2025-06-18")
        assert reply["result"]["protocolVersion"] == "2025-06-18"
        assert reply["result"]["capabilities"] == {"tools": {"listChanged": False}}
        assert "resultType" not in reply["result"]
        tools = {t["name"]: t for t in (await bridge.request("tools/list"))["result"]["tools"]}
        assert set(tools) == TOOL_NAMES
        assert (await bridge.request("ping"))["result"] == {}

        async def ok(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            validate(arguments, tools[name]["inputSchema"])
            result = await bridge.call_tool(name, arguments)
            assert result["isError"] is False and result["content"][0]["text"], result
            validate(result["structuredContent"], tools[name]["outputSchema"])
            structured: dict[str, Any] = result["structuredContent"]
            return structured

        added = await ok("remember", {"content": "Alice plays the cello with Sarah", "about": ["Sarah"]})
        found = await ok("recall", {"query": "cello"})
        assert found["memories"][0]["id"] == added["id"]
        assert "cello" in (await ok("context", {"message": "Shall we play the cello?"}))["text"]
        assert (await ok("list_memories", {}))["memories"][0]["id"] == added["id"]
        assert (await ok("memory_history", {"id": added["id"]}))["versions"][0]["id"] == added["id"]
        assert (await ok("people", {}))["people"][0]["name"] == "Sarah"
        assert (await ok("people", {"name": "Sarah"}))["person"]["memory_count"] == 1
        assert await ok("forget", {"id": added["id"]}) == {"deleted": True, "id": added["id"]}
        gone = await bridge.call_tool("forget", {"id": added["id"]})
        assert gone["isError"] is True and "nothing was deleted" in gone["content"][0]["text"]
        # Once the process is a handshake session, the stateless envelope is refused.
        refused = await bridge.modern("tools/list")
        assert refused["error"]["code"] == -32600


@pytest.mark.parametrize(
    ("offered", "served"), [("2025-11-25", "2025-11-25"), ("2024-11-05", "2025-11-25"), ("1900-01-01", "2025-11-25")]
)
async def test_initialize_answers_an_unsupported_version_with_its_own(
    token_daemon: Daemon, pyz: Path, offered: str, served: str
) -> None:
    async with RawBridge.open(pyz, env_for(token_daemon, "alice")) as bridge:
        assert (await bridge.initialize(offered))["result"]["protocolVersion"] == served


async def test_stateless_requests_name_their_revision(token_daemon: Daemon, pyz: Path) -> None:
    async with RawBridge.open(pyz, env_for(token_daemon, "alice")) as bridge:
        # No revision at all: invalid params, naming the field.
        missing = await bridge.request("tools/list")
        assert missing["error"]["code"] == -32602 and "protocolVersion" in missing["error"]["message"]
        unsupported = await bridge.modern("tools/list", version="2099-01-01")
        assert unsupported["error"]["code"] == -32022
        assert unsupported["error"]["data"] == {
            "supported": [MODERN, "2025-11-25", "2025-06-18"],
            "requested": "2099-01-01",
        }
        discovered = (await bridge.modern("server/discover"))["result"]
        assert discovered["supportedVersions"][0] == MODERN and discovered["resultType"] == "complete"
        assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "memoryd"
        listed = (await bridge.modern("tools/list"))["result"]
        assert (listed["cacheScope"], listed["resultType"]) == ("public", "complete") and listed["ttlMs"] > 0
        called = await bridge.call_tool("list_memories", {}, modern=True)
        assert called["resultType"] == "complete" and called["structuredContent"] == {"memories": []}
        # A stateless process refuses a late handshake, naming what it serves.
        late = await bridge.initialize("2025-06-18")
        assert late["error"]["code"] == -32022 and MODERN in late["error"]["data"]["supported"]


async def test_bad_input_gets_its_error_and_the_bridge_keeps_serving(token_daemon: Daemon, pyz: Path) -> None:
    async with RawBridge.open(pyz, env_for(token_daemon, "alice")) as bridge:
        await bridge.initialize("2025-11-25")

        async def still_serving() -> None:
            assert (await bridge.request("ping"))["result"] == {}

        await bridge.send_bytes(b'{"jsonrpc": "2.0", "id": 7, "method": \n')
        reply = await bridge.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32700)
        await still_serving()
        await bridge.send_bytes(b"\xff\xfe not utf-8\n")
        assert (await bridge.receive())["error"]["code"] == -32700
        await still_serving()
        await bridge.send_bytes(b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]\n')
        assert (await bridge.receive())["error"]["code"] == -32600
        await still_serving()

        unknown_method = await bridge.request("resources/list")
        assert unknown_method["error"]["code"] == -32601 and "resources/list" in unknown_method["error"]["message"]
        await still_serving()
        unknown_tool = await bridge.request("tools/call", {"name": "drop_database", "arguments": {}})
        assert unknown_tool["error"]["code"] == -32602 and "drop_database" in unknown_tool["error"]["message"]
        not_an_object = await bridge.request("tools/call", {"name": "recall", "arguments": ["query"]})
        assert not_an_object["error"]["code"] == -32602
        await still_serving()

        # Arguments that fail the schema: a tool error naming the argument, for the model to fix.
        for arguments, named in [
            ({}, "query: is required"),
            ({"query": 42}, "query: must be string"),
            ({"query": "tea", "limit": "5"}, "limit: must be integer"),
            ({"query": "tea", "limit": 0}, "limit: must be at least 1"),
            ({"query": "tea", "colour": "red"}, "colour: unknown argument"),
        ]:
            result = await bridge.call_tool("recall", arguments)
            assert result["isError"] is True and named in result["content"][0]["text"], (arguments, result)
            assert "structuredContent" not in result
        await still_serving()

        # Oversized content: over the schema's length, and over the daemon's 16 KiB in bytes.
        too_long = await bridge.call_tool("remember", {"content": "x" * 20_000})
        assert (
            too_long["isError"]
            and "content: must be at most 16384 characters (got 20000)" in too_long["content"][0]["text"]
        )
        too_many_bytes = await bridge.call_tool("remember", {"content": "é" * 10_000})
        assert too_many_bytes["isError"] and "content" in too_many_bytes["content"][0]["text"]
        assert "16384 bytes" in too_many_bytes["content"][0]["text"]
        # A message over the bridge's line limit is skipped whole and answered.
        await bridge.send_bytes(
            b'{"jsonrpc": "2.0", "id": 99, "method": "ping", "params": {"pad": "' + b"y" * 1_200_000 + b'"}}\n'
        )
        oversized = await bridge.receive()
        assert oversized["error"]["code"] == -32600 and "over the limit" in oversized["error"]["message"]
        await still_serving()
        listed = await bridge.call_tool("list_memories", {})
        assert listed["structuredContent"] == {"memories": []}, "nothing refused was stored"


async def test_bad_input_in_the_stateless_revision_gets_the_same_errors(token_daemon: Daemon, pyz: Path) -> None:
    async with RawBridge.open(pyz, env_for(token_daemon, "alice")) as bridge:

        async def still_serving() -> None:
            assert (await bridge.modern("tools/list"))["result"]["tools"]

        await still_serving()
        await bridge.send_bytes(b'{"jsonrpc": "2.0", "id": 7, "method": \n')
        assert (await bridge.receive())["error"]["code"] == -32700
        await still_serving()
        unknown_method = await bridge.modern("resources/list")
        assert unknown_method["error"]["code"] == -32601 and "resources/list" in unknown_method["error"]["message"]
        unknown_tool = await bridge.modern("tools/call", {"name": "drop_database", "arguments": {}})
        assert unknown_tool["error"]["code"] == -32602 and "drop_database" in unknown_tool["error"]["message"]
        not_an_object = await bridge.modern("tools/call", {"name": "recall", "arguments": "query"})
        assert not_an_object["error"]["code"] == -32602
        await still_serving()
        for name, arguments, named in [
            ("recall", {"query": "tea", "limit": 101}, "limit: must be at most 100"),
            ("remember", {"content": "x" * 20_000}, "content: must be at most 16384 characters"),
            ("remember", {"content": "tea", "user_id": "bob"}, "user_id: not accepted"),
        ]:
            result = await bridge.call_tool(name, arguments, modern=True)
            assert result["isError"] is True and named in result["content"][0]["text"], (arguments, result)
            assert result["resultType"] == "complete" and "structuredContent" not in result
        await still_serving()
        listed = await bridge.call_tool("list_memories", {}, modern=True)
        assert listed["structuredContent"] == {"memories": []}, "nothing refused was stored"


async def test_two_users_bridges_cannot_reach_each_others_memories(token_daemon: Daemon, pyz: Path) -> None:
    alice_env, bob_env = env_for(token_daemon, "alice", "alice-dm"), env_for(token_daemon, "bob", "bob-dm")
    async with sdk_client(pyz, alice_env, "auto") as alice_client, sdk_client(pyz, bob_env, "auto") as bob_client:
        alice, bob = await Checked.listing(alice_client), await Checked.listing(bob_client)
        secret = await alice.ok("remember", {"content": "Alice's locker code is 4711", "about": ["Sarah"]})
        await bob.ok("remember", {"content": "Bob likes hiking"})
        seen: list[str] = []
        for name, arguments in [
            ("recall", {"query": "locker code 4711"}),
            ("list_memories", {"limit": 200}),
            ("context", {"message": "What is the locker code?"}),
            ("people", {}),
        ]:
            seen.append(json.dumps(await bob.ok(name, arguments)))
        for name, arguments in [
            ("forget", {"id": secret["id"]}),
            ("memory_history", {"id": secret["id"]}),
            ("people", {"name": "Sarah"}),
        ]:
            seen.append(await bob.failed(name, arguments))
        blob = "\n".join(seen)
        for leak in ("4711", secret["id"][:8]):
            assert leak not in blob, blob
        assert "Bob likes hiking" in blob
        # Nor may an error tell her ids from ids that never existed, by id or by prefix.
        never = "Z" * 26
        for cut in (26, 12, 8):
            for name in ("forget", "memory_history", "pin_memory", "unpin_memory", "list_memories"):
                key = "before_id" if name == "list_memories" else "id"
                hers = await bob.failed(name, {key: secret["id"][:cut]})
                nobodys = await bob.failed(name, {key: never[:cut]})
                assert hers.replace(secret["id"][:cut], "<id>") == nobodys.replace(never[:cut], "<id>"), name
        by_name: list[tuple[str, dict[str, Any]]] = [
            ("forget_person", {"name": "Sarah", "confirm": True}),
            ("people", {"name": "Sarah"}),
        ]
        for name, arguments in by_name:
            assert await bob.failed(name, arguments) == await bob.failed(name, {**arguments, "name": "Nobody"})
        # An argument naming another user is refused, never honoured.
        for name, arguments in [
            ("recall", {"query": "locker", "user_id": "alice"}),
            ("list_memories", {"chat_id": "alice-dm"}),
            ("forget", {"id": secret["id"], "context_token": mint_token(SECRET, "alice")}),
            ("remember", {"content": "planted", "user_id": "alice"}),
        ]:
            refusal = await bob.failed(name, arguments)
            assert "identity is never taken from tool arguments" in refusal, refusal
        # Alice's memory is intact (not pinned by Bob either), and nothing was planted in her name.
        mine = await alice.ok("list_memories", {})
        assert [(m["content"], m.get("pinned")) for m in mine["memories"]] == [("Alice's locker code is 4711", None)]


async def test_an_expired_token_is_the_daemons_refusal_for_the_model_to_read(token_daemon: Daemon, pyz: Path) -> None:
    expired = mint_token(SECRET, "alice", ttl=60, now=1_000_000)
    async with RawBridge.open(pyz, bridge_env(token_daemon.config.socket_path, MEMORY_CONTEXT_TOKEN=expired)) as bridge:
        await bridge.initialize("2025-11-25")
        refused = await bridge.call_tool("recall", {"query": "anything"})
        assert refused == {
            "content": [{"type": "text", "text": "Unauthorized: context token expired"}],
            "isError": True,
        }
        assert (await bridge.request("ping"))["result"] == {}


async def test_a_daemon_that_is_down_is_reported_and_picked_up_once_back(
    short_tmp: Path, pyz: Path, nursery: trio.Nursery
) -> None:
    config = make_config(short_tmp)
    env = bridge_env(config.socket_path, MEMORY_USER_ID="alice")
    async with RawBridge.open(pyz, env) as bridge:
        await bridge.initialize("2025-11-25")
        down = await bridge.call_tool("recall", {"query": "anything"})
        assert down["isError"] and "not available" in down["content"][0]["text"]
        assert str(config.socket_path) in down["content"][0]["text"]
        daemon = Daemon(config)
        await nursery.start(daemon.run)
        added = await bridge.call_tool("remember", {"content": "memoryd is back"})
        assert added["isError"] is False
        assert (await bridge.call_tool("recall", {"query": "back"}))["structuredContent"]["memories"][0][
            "content"
        ] == "memoryd is back"
        daemon.request_stop()


async def test_without_an_identity_the_bridge_does_not_start(pyz: Path, short_tmp: Path) -> None:
    done = await trio.run_process(
        ["/usr/bin/env", "-i", "PATH=/usr/bin:/bin", *bridge_argv(pyz)],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == b""
    assert b"MEMORY_CONTEXT_TOKEN" in done.stderr


@pytest.mark.parametrize(
    ("identity", "field"),
    [
        ({"MEMORY_USER_ID": "   "}, b"user_id"),
        ({"MEMORY_USER_ID": "alice", "MEMORY_CHAT_ID": "team\u200b"}, b"chat_id"),
    ],
)
async def test_with_an_identity_that_breaks_the_rule_the_bridge_does_not_start(
    pyz: Path, short_tmp: Path, identity: dict[str, str], field: bytes
) -> None:
    done = await trio.run_process(
        bridge_argv(pyz),
        env=bridge_env(short_tmp / "memoryd.sock", **identity),
        stdin=b"",
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == b""
    assert field in done.stderr and b"identifier rule" in done.stderr


@pytest.mark.parametrize("client", ["claude", "cursor", "codex"])
async def test_print_config_gives_a_pasteable_snippet(pyz: Path, short_tmp: Path, client: str) -> None:
    env = bridge_env(short_tmp / "memoryd.sock", MEMORY_USER_ID="alice", MEMORY_CHAT_ID="team")
    done = await trio.run_process(
        [*bridge_argv(pyz), "--print-config", client], capture_stdout=True, capture_stderr=True, check=True, env=env
    )
    text = done.stdout.decode()
    if client == "codex":
        import tomllib

        server = tomllib.loads(text)["mcp_servers"]["memory"]
    else:
        server = json.loads(text)["mcpServers"]["memory"]
    assert server["command"] == str(pyz) and server["args"] == ["mcp"]
    assert server["env"] == {
        "MEMORYD_SOCKET": str(short_tmp / "memoryd.sock"),
        "MEMORY_USER_ID": "alice",
        "MEMORY_CHAT_ID": "team",
    }
    # The snippet starts a working bridge.
    async with RawBridge.open(pyz, {**env, **server["env"]}) as bridge:
        assert (await bridge.initialize("2025-11-25"))["result"]["serverInfo"]["name"] == "memoryd"
