"""Every method over a real socket: results, bad inputs, visibility, expiry, persistence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.ids import new_ulid
from memoryd.server.daemon import Daemon
from tests.conftest import make_config
from tests.store_helpers import sql
from tests.wire import NdjsonPeer, call_ok

ALICE = {"user_id": "alice"}
HIT_FIELDS = {
    "id",
    "content",
    "score",
    "similarity",
    "source",
    "subjects",
    "scope",
    "created_at",
    "expires_at",
    "metadata",
}


async def test_add_search_list_delete_round_trip(peer: NdjsonPeer) -> None:
    added = await call_ok(
        peer,
        "memory.add",
        {**ALICE, "content": "wife Sarah likes Italian food", "subjects": ["Sarah"], "source": "user"},
    )
    assert added["scope"] == "personal" and added["deduplicated"] is False
    assert added["id"].startswith(added["short_id"]) and len(added["short_id"]) >= 8
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "what food does Sarah like?"})
    assert [h["id"] for h in hits] == [added["id"]]
    hit = hits[0]
    assert HIT_FIELDS <= set(hit)
    assert hit["subjects"] == ["Sarah"] and hit["source"] == "user" and 0.0 <= hit["similarity"] <= 1.0
    assert hit["created_at"].endswith("Z") and hit["expires_at"] is None
    listed = await call_ok(peer, "memory.list", ALICE)
    assert [m["id"] for m in listed] == [added["id"]]
    assert await call_ok(peer, "memory.delete", {**ALICE, "memory_id": added["short_id"]}) == {
        "deleted": True,
        "id": added["id"],
    }
    assert await call_ok(peer, "memory.search", {**ALICE, "query": "Sarah"}) == []
    assert await call_ok(peer, "memory.list", ALICE) == []
    again = await call_ok(peer, "memory.delete", {**ALICE, "memory_id": added["id"]})
    assert again == {"deleted": False, "id": None}


async def test_adding_the_same_fact_twice_returns_the_first(peer: NdjsonPeer) -> None:
    first = await call_ok(peer, "memory.add", {**ALICE, "content": "allergic to peanuts"})
    second = await call_ok(peer, "memory.add", {**ALICE, "content": "allergic to peanuts"})
    assert second["id"] == first["id"] and second["deduplicated"] is True


async def test_list_is_newest_first_with_offset_and_cursor(peer: NdjsonPeer) -> None:
    ids = [(await call_ok(peer, "memory.add", {**ALICE, "content": f"fact number {i}"}))["id"] for i in range(5)]
    listed = await call_ok(peer, "memory.list", {**ALICE, "limit": 2})
    assert [m["id"] for m in listed] == ids[::-1][:2]
    listed = await call_ok(peer, "memory.list", {**ALICE, "limit": 2, "offset": 2})
    assert [m["id"] for m in listed] == ids[::-1][2:4]
    listed = await call_ok(peer, "memory.list", {**ALICE, "limit": 10, "before_id": ids[2]})
    assert [m["id"] for m in listed] == [ids[1], ids[0]]


BIG = "x" * (16 * 1024 + 1)
BAD_INPUTS = [
    # (method, params, code, field)
    ("memory.add", {"content": "no user"}, -32602, "user_id"),
    ("memory.add", {"user_id": "", "content": "empty user"}, -32602, "user_id"),
    ("memory.add", {"user_id": 5, "content": "numeric user"}, -32602, "user_id"),
    ("memory.add", ALICE, -32602, "content"),
    ("memory.add", {**ALICE, "content": ""}, -32602, "content"),
    ("memory.add", {**ALICE, "content": "   "}, -32602, "content"),
    ("memory.add", {**ALICE, "content": BIG}, -32602, "content"),
    ("memory.add", {**ALICE, "content": "nul \x00 inside"}, -32602, "content"),
    ("memory.add", {**ALICE, "content": 42}, -32602, "content"),
    ("memory.add", {**ALICE, "content": "ok", "bogus": 1}, -32602, "bogus"),
    ("memory.add", {**ALICE, "content": "ok", "expires_days": 0}, -32602, "expires_days"),
    ("memory.add", {**ALICE, "content": "ok", "expires_days": -1}, -32602, "expires_days"),
    ("memory.add", {**ALICE, "content": "ok", "expires_days": "3"}, -32602, "expires_days"),
    ("memory.add", {**ALICE, "content": "ok", "subjects": "Sarah"}, -32602, "subjects"),
    ("memory.add", {**ALICE, "content": "ok", "subjects": ["ok", 3]}, -32602, "subjects[1]"),
    ("memory.add", {**ALICE, "content": "ok", "shared": True}, -32602, "chat_id"),
    ("memory.add", {**ALICE, "content": "ok", "shared": "yes"}, -32602, "shared"),
    ("memory.search", ALICE, -32602, "query"),
    ("memory.search", {**ALICE, "query": "x", "limit": 0}, -32602, "limit"),
    ("memory.search", {**ALICE, "query": "x", "limit": 101}, -32602, "limit"),
    ("memory.search", {**ALICE, "query": "x", "limit": -1}, -32602, "limit"),
    ("memory.search", {**ALICE, "query": "x", "limit": "5"}, -32602, "limit"),
    ("memory.search", {**ALICE, "query": "x", "limit": 2.5}, -32602, "limit"),
    ("memory.search", {**ALICE, "query": "x", "limit": True}, -32602, "limit"),
    ("memory.search", {**ALICE, "query": "\x00"}, -32602, "query"),
    ("memory.list", {**ALICE, "limit": 1001}, -32602, "limit"),
    ("memory.list", {**ALICE, "offset": -1}, -32602, "offset"),
    ("memory.list", {**ALICE, "offset": 2**63 - 1}, -32602, "offset"),  # was -32603 OverflowError
    ("memory.list", {**ALICE, "offset": 2**64}, -32602, "offset"),
    ("memory.add", {**ALICE, "content": "a\ud800b"}, -32602, "content"),  # a lone surrogate
    ("memory.add", {**ALICE, "content": "ok", "subjects": ["\udfff"]}, -32602, "subjects[0]"),
    ("memory.search", {**ALICE, "query": "\ud83d"}, -32602, "query"),
    ("memory.list", {**ALICE, "include_expired": "no"}, -32602, "include_expired"),
    ("memory.delete", ALICE, -32602, "memory_id"),
    ("memory.delete", {**ALICE, "memory_id": "0123"}, -32602, "memory_id"),
    ("memory.delete", {**ALICE, "memory_id": "not an id!"}, -32602, "memory_id"),
    ("memory.list", {"chat_id": "c1"}, -32602, "user_id"),
]


async def test_a_lone_surrogate_is_answered_with_the_request_id(peer: NdjsonPeer) -> None:
    reply = await peer.call("memory.add", {**ALICE, "content": "\ud800"}, id="req-9")
    assert reply["id"] == "req-9" and reply["error"]["code"] == -32602


@pytest.mark.parametrize(("method", "params", "code", "field"), BAD_INPUTS)
async def test_bad_input_gets_a_clear_error_naming_the_field(
    peer: NdjsonPeer, method: str, params: dict[str, Any], code: int, field: str
) -> None:
    reply = await peer.call(method, params)
    assert reply["error"]["code"] == code, reply
    assert reply["error"]["data"]["field"] == field, reply
    assert field.split("[")[0] in reply["error"]["message"]
    assert reply["error"]["data"]["reason"]
    # Nothing was stored by a refused add.
    assert await call_ok(peer, "memory.list", {**ALICE, "include_expired": True}) == []


async def test_exactly_16_kib_of_content_is_accepted(peer: NdjsonPeer) -> None:
    content = "é" * (8 * 1024)  # 16 KiB of UTF-8
    added = await call_ok(peer, "memory.add", {**ALICE, "content": content})
    assert (await call_ok(peer, "memory.list", ALICE))[0]["id"] == added["id"]


async def test_ash_routing_fields_are_accepted_and_recorded(peer: NdjsonPeer) -> None:
    routing = {
        "context_token": None,
        "chat_type": "private",
        "provider": "telegram",
        "thread_id": "t1",
        "session_key": "s",
        "message_id": "m1",
        "source_username": "al",
        "source_display_name": "Al",
        "username": "al",
        "current_user_message": "remember this",
        "timezone": "Europe/Berlin",
        "chat_title": "DM",
        "this_chat": False,
    }
    added = await call_ok(peer, "memory.add", {**ALICE, "chat_id": "dm-al", **routing, "content": "likes hiking"})
    hits = await call_ok(peer, "memory.search", {**ALICE, **routing, "query": "hiking"})
    assert [h["id"] for h in hits] == [added["id"]]
    assert {k: hits[0][k] for k in ("chat_id", "chat_type", "source_username", "source_message_id")} == {
        "chat_id": "dm-al",
        "chat_type": "private",
        "source_username": "al",
        "source_message_id": "m1",
    }
    # this_chat keeps what was learned in the current chat: none without a chat.
    assert await call_ok(peer, "memory.search", {**ALICE, **routing, "this_chat": True, "query": "hiking"}) == []
    here = {**ALICE, **routing, "chat_id": "dm-al", "this_chat": True}
    assert [h["id"] for h in await call_ok(peer, "memory.search", {**here, "query": "hiking"})] == [added["id"]]
    # ash sends an unset env var as null and a set-but-empty one as "": both mean unknown.
    blank = await call_ok(peer, "memory.add", {**ALICE, "chat_type": "", "source_username": None, "content": "x y"})
    assert (await call_ok(peer, "memory.get", {**ALICE, "memory_id": blank["id"]}))["chat_type"] is None
    numbered = await call_ok(peer, "memory.add", {**ALICE, "message_id": 4711, "content": "a numbered message"})
    assert (await call_ok(peer, "memory.get", {**ALICE, "memory_id": numbered["id"]}))["source_message_id"] == "4711"


HOSTILE_QUERIES = [
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "NEAR(a b, 2)",
    "*",
    '"',
    '""',
    '"unterminated',
    "a AND",
    "(",
    ")",
    "a OR OR b",
    "peanuts*",
    "^peanuts",
    "col:peanuts",
    "content: peanuts",
    "{a b}",
    "a - b",
    "'; DROP TABLE memories; --",
    "🥜🥜",
    "ピーナッツ",
    "é",
    "\u200b",
    "\\",
    "a\nb",
    "%_%",
    "-",
    "+",
    "NEAR/3",
    'peanuts"',
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
async def test_search_never_errors_on_hostile_queries(peer: NdjsonPeer, query: str) -> None:
    await call_ok(peer, "memory.add", {**ALICE, "content": "allergic to peanuts 🥜 (ピーナッツ) AND NEAR OR"})
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": query})
    assert isinstance(hits, list)


async def test_users_and_chats_only_see_what_is_theirs(peer: NdjsonPeer) -> None:
    bob = {"user_id": "bob"}
    alice_in_c1 = {**ALICE, "chat_id": "c1"}
    alice_private = await call_ok(peer, "memory.add", {**ALICE, "content": "alice secret pizza code"})
    bob_private = await call_ok(peer, "memory.add", {**bob, "content": "bob secret pizza code"})
    c1_group = await call_ok(peer, "memory.add", {**alice_in_c1, "content": "group c1 pizza night", "shared": True})
    c2_group = await call_ok(
        peer, "memory.add", {"user_id": "carol", "chat_id": "c2", "content": "group c2 pizza night", "shared": True}
    )

    async def visible(caller: dict[str, Any]) -> set[str]:
        hits = await call_ok(peer, "memory.search", {**caller, "query": "pizza", "limit": 100})
        listed = await call_ok(peer, "memory.list", {**caller, "limit": 1000, "include_expired": True})
        assert {h["id"] for h in hits} == {m["id"] for m in listed}
        return {h["id"] for h in hits}

    assert await visible(ALICE) == {alice_private["id"]}
    assert await visible(alice_in_c1) == {alice_private["id"], c1_group["id"]}
    assert await visible({**bob, "chat_id": "c1"}) == {bob_private["id"], c1_group["id"]}
    assert await visible({**bob, "chat_id": "c2"}) == {bob_private["id"], c2_group["id"]}
    scopes = {h["id"]: h["scope"] for h in await call_ok(peer, "memory.search", {**alice_in_c1, "query": "pizza"})}
    assert scopes == {alice_private["id"]: "personal", c1_group["id"]: "group"}

    # Bob cannot delete Alice's memory, by full id or by prefix, from any chat.  Prefixes are
    # tried only where Bob sees nothing else: ids made together share long prefixes (ULIDs of one
    # millisecond differ in the last characters), so in c1 a prefix of Alice's id may rightly
    # match the group memory Bob can see there.
    for memory_id in (alice_private["id"], alice_private["id"][:8], alice_private["id"][:20].lower()):
        reply = await call_ok(peer, "memory.delete", {"user_id": "dave", "memory_id": memory_id})
        assert reply == {"deleted": False, "id": None}
    for caller in (bob, {**bob, "chat_id": "c1"}, {**bob, "chat_id": "c2"}):
        reply = await call_ok(peer, "memory.delete", {**caller, "memory_id": alice_private["id"]})
        assert reply == {"deleted": False, "id": None}
    # Nor the group memory of a chat he is not in.
    assert (await call_ok(peer, "memory.delete", {**bob, "chat_id": "c9", "memory_id": c1_group["id"]}))[
        "deleted"
    ] is False
    assert await visible(ALICE) == {alice_private["id"]}
    # Group memories can be deleted by members of the chat.
    assert (await call_ok(peer, "memory.delete", {**bob, "chat_id": "c1", "memory_id": c1_group["id"]}))["deleted"]


async def test_expired_memories_are_hidden_unless_asked_for(peer: NdjsonPeer) -> None:
    short = await call_ok(
        peer, "memory.add", {**ALICE, "content": "parking spot 42 today", "expires_days": 0.3 / 86400}
    )
    keep = await call_ok(peer, "memory.add", {**ALICE, "content": "parking spot preference: shade", "expires_days": 30})
    assert short["expires_at"] is not None
    await trio.sleep(0.5)
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "parking spot"})
    assert [h["id"] for h in hits] == [keep["id"]]
    assert [m["id"] for m in await call_ok(peer, "memory.list", ALICE)] == [keep["id"]]
    with_expired = await call_ok(peer, "memory.list", {**ALICE, "include_expired": True})
    assert {m["id"] for m in with_expired} == {short["id"], keep["id"]}


async def test_get_of_an_expired_memory_answers_not_found(peer: NdjsonPeer) -> None:
    brief = await call_ok(
        peer, "memory.add", {**ALICE, "content": "gate B7 until boarding", "expires_days": 0.3 / 86400}
    )
    assert (await call_ok(peer, "memory.get", {**ALICE, "memory_id": brief["id"]}))["id"] == brief["id"]
    await trio.sleep(0.5)
    reply = await peer.call("memory.get", {**ALICE, "memory_id": brief["id"]})
    assert reply["error"]["code"] == -32001 and reply["error"]["data"]["field"] == "memory_id"
    # Still there for the caller who asks for expired memories, and still deletable.
    with_expired = await call_ok(peer, "memory.list", {**ALICE, "include_expired": True})
    assert [m["id"] for m in with_expired] == [brief["id"]]
    assert (await call_ok(peer, "memory.delete", {**ALICE, "memory_id": brief["id"]}))["deleted"] is True


async def test_a_short_prefix_only_ever_matches_the_callers_own_memories(peer: NdjsonPeer) -> None:
    alice_memory = await call_ok(peer, "memory.add", {**ALICE, "content": "alice only"})
    prefix = alice_memory["id"][:8]
    # Bob has nothing visible with that prefix: nothing happens, and nothing is revealed.
    assert await call_ok(peer, "memory.delete", {"user_id": "bob", "memory_id": prefix}) == {
        "deleted": False,
        "id": None,
    }
    assert [m["id"] for m in await call_ok(peer, "memory.list", ALICE)] == [alice_memory["id"]]


async def test_an_ambiguous_prefix_is_refused(daemon: Daemon, peer: NdjsonPeer) -> None:
    # New ids never share 8 characters; ULIDs from before (imports, older stores) made in the
    # same 256 ms do.  Give two memories such ids, as an older store would have them.
    for i in range(2):
        await call_ok(peer, "memory.add", {**ALICE, "content": f"burst {i}"})
    instant = 1_700_000_000_000
    for i in range(2):
        # In a thread: the daemon's loop keeps running while this waits for its write lock.
        update = ("UPDATE memories SET id = ? WHERE content = ?", (new_ulid(instant), f"burst {i}"))
        await trio.to_thread.run_sync(sql, daemon.config.db_path, *update)
    ids = [row[0] for row in sql(daemon.config.db_path, "SELECT id FROM memories ORDER BY id")]
    common = 8
    while ids[0][: common + 1] == ids[1][: common + 1]:
        common += 1
    reply = await peer.call("memory.delete", {**ALICE, "memory_id": ids[0][:common]})
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["field"] == "memory_id"
    assert "ambiguous" in reply["error"]["data"]["reason"]
    assert len(await call_ok(peer, "memory.list", ALICE)) == 2


async def test_health_reports_counts_and_embedder(peer: NdjsonPeer) -> None:
    await call_ok(peer, "memory.add", {**ALICE, "content": "one"})
    health = await call_ok(peer, "system.health", {})
    assert health["status"] == "ok" and health["version"]
    assert health["embedder"]["backend"] == "none"
    assert health["counts"]["memories_active"] == 1
    assert "backlog" in health and "server" in health


async def test_health_answered_in_the_read_loop_matches_the_full_path_and_sees_every_write(
    peer: NdjsonPeer, daemon: Daemon
) -> None:
    # The first call reads the store (a task); the next ones are answered inline from the cache.
    slow = await call_ok(peer, "system.health", {})
    fast = await call_ok(peer, "system.health", {})
    for reply in (slow, fast):
        reply.pop("uptime_seconds")
        reply["server"].pop("requests_total")
        reply["counts"].pop("db_bytes")  # the file may grow between the two (WAL, a checkpoint)
    assert fast == slow
    for count in (1, 2, 3):
        await call_ok(peer, "memory.add", {**ALICE, "content": f"fact number {count}"})
        # A write makes the cached numbers stale at once: never a count from before it.
        assert (await call_ok(peer, "system.health", {}))["counts"]["memories_active"] == count
    server = daemon.server
    assert server is not None
    before = server.stats()["requests_total"]
    await call_ok(peer, "system.health", {})
    assert server.stats()["requests_total"] == before + 1  # counted once whichever path answered


async def test_memories_survive_a_restart(short_tmp: Path) -> None:
    config = make_config(short_tmp)
    async with trio.open_nursery() as nursery:
        first = Daemon(config)
        await nursery.start(first.run)
        peer = await NdjsonPeer.connect(config.socket_path)
        added = await call_ok(peer, "memory.add", {**ALICE, "content": "survives restarts"})
        first.request_stop()
    assert not config.socket_path.exists()
    async with trio.open_nursery() as nursery:
        second = Daemon(config)
        await nursery.start(second.run)
        peer = await NdjsonPeer.connect(config.socket_path)
        hits = await call_ok(peer, "memory.search", {**ALICE, "query": "restarts"})
        assert [h["id"] for h in hits] == [added["id"]]
        second.request_stop()


async def test_get_returns_a_visible_memory_and_not_found_otherwise(peer: NdjsonPeer) -> None:
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "favourite colour is teal"})
    record = await call_ok(peer, "memory.get", {**ALICE, "memory_id": added["short_id"].lower()})
    assert record["id"] == added["id"] and record["content"] == "favourite colour is teal"
    for caller in ({"user_id": "bob"}, {"user_id": "bob", "chat_id": "c1"}):
        reply = await peer.call("memory.get", {**caller, "memory_id": added["id"]})
        assert reply["error"]["code"] == -32001 and reply["error"]["data"]["field"] == "memory_id"
    await call_ok(peer, "memory.delete", {**ALICE, "memory_id": added["id"]})
    assert (await peer.call("memory.get", {**ALICE, "memory_id": added["id"]}))["error"]["code"] == -32001


async def test_a_database_locked_by_another_process_answers_unavailable(short_tmp: Path, nursery: trio.Nursery) -> None:
    import apsw

    instance = Daemon(make_config(short_tmp, storage={"busy_timeout_ms": 200}))
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(instance.config.socket_path)
    await call_ok(peer, "memory.add", {**ALICE, "content": "written before the lock"})
    # Another process (here: another connection, as `memoryd import` would) holds the write lock.
    other = apsw.Connection(str(instance.config.db_path))
    other.execute("BEGIN IMMEDIATE")
    try:
        reply = await peer.call("memory.add", {**ALICE, "content": "written during the lock"})
        assert reply["error"]["code"] == -32007, reply
        assert reply["error"]["data"] == {"busy_timeout_ms": 200}
        # Readers are not blocked by a writer under WAL.
        assert len(await call_ok(peer, "memory.list", ALICE)) == 1
    finally:
        other.execute("ROLLBACK")
        other.close()
    await call_ok(peer, "memory.add", {**ALICE, "content": "written after the lock"})
    assert len(await call_ok(peer, "memory.list", ALICE)) == 2
    instance.request_stop()


async def test_health_shows_a_changed_part_at_once_though_its_encoding_is_reused(peer: NdjsonPeer) -> None:
    # Two calls from the cache, then an add refused for the secret in it: nothing is written, so
    # the store's numbers stay cached, but the secrets part must change in the very next reply.
    first = await call_ok(peer, "system.health", {})
    assert (await call_ok(peer, "system.health", {}))["secrets"] == first["secrets"]
    secret = "ghp_" + "a1B2c3D4e5" * 4
    assert (await peer.call("memory.add", {**ALICE, "content": f"my token {secret}"}))["error"]["code"] == -32602
    after = await call_ok(peer, "system.health", {})
    assert after["secrets"]["refused"] == first["secrets"]["refused"] + 1
    assert after["counts"]["memories_active"] == first["counts"]["memories_active"]
