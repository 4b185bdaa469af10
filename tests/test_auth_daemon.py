"""Token mode on a real daemon: the verified claims are the identity, and nothing else is."""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.config import load_config
from memoryd.errors import ConfigError
from memoryd.server.daemon import Daemon
from memoryd_client import AsyncMemoryClient, Unauthorized, mint_token
from memoryd_client.tokens import verify_token
from tests.conftest import REPO, make_config
from tests.wire import NdjsonPeer, call_error, call_ok

SECRET = "5f1e0c3a9b7d2e4f6a8c0b1d3e5f7a9c1b3d5e7f9a0c2e4f6a8b0d2f4e6a8c0b"
OTHER_SECRET = "aa" * 32


def token_for(user: str, chat: str | None = None, **kwargs: Any) -> str:
    return mint_token(SECRET, user, chat, **kwargs)


async def start(short_tmp: Path, nursery: trio.Nursery, **auth: Any) -> Daemon:
    instance = Daemon(make_config(short_tmp, auth={"mode": "token", "token_secret": SECRET, **auth}))
    await nursery.start(instance.run)
    return instance


@pytest.fixture
async def token_daemon(short_tmp: Path, nursery: trio.Nursery) -> Daemon:
    """Token mode; the test process is NOT trusted, so it is just another sandbox here."""
    return await start(short_tmp, nursery)


@pytest.fixture
async def peer(token_daemon: Daemon) -> NdjsonPeer:
    return await NdjsonPeer.connect(token_daemon.config.socket_path)


async def refused(peer: NdjsonPeer, method: str, params: dict[str, Any]) -> dict[str, Any]:
    error = await call_error(peer, method, params)
    assert error["code"] == -32002, error
    assert error["data"]["reason"] and error["data"]["reason"] in error["message"]
    return error


async def test_the_token_decides_who_the_caller_is(peer: NdjsonPeer) -> None:
    alice = {"context_token": token_for("alice", "team")}
    added = await call_ok(peer, "memory.add", {**alice, "content": "alice likes green tea", "shared": True})
    assert added["scope"] == "group"
    await call_ok(peer, "memory.add", {**alice, "content": "alice private note"})
    # Sending the same ids as the claims is fine; ash's CLI does exactly that.
    same = {**alice, "user_id": "alice", "chat_id": "team"}
    assert {m["content"] for m in await call_ok(peer, "memory.list", same)} == {
        "alice likes green tea",
        "alice private note",
    }
    listed = await call_ok(peer, "memory.list", alice)
    assert all(m["owner"] == "alice" for m in listed) and len(listed) == 2
    # Bob in the same chat sees the group memory, not Alice's personal one.
    bob = {"context_token": token_for("bob", "team")}
    assert [m["content"] for m in await call_ok(peer, "memory.list", bob)] == ["alice likes green tea"]
    assert await call_ok(peer, "memory.search", {**bob, "query": "private note"}) == []


@pytest.mark.parametrize(
    ("params", "field", "code"),
    [
        ({"user_id": "alice"}, "context_token", "missing"),
        ({"context_token": token_for("alice", "team"), "user_id": "bob"}, "user_id", "mismatch"),
        ({"context_token": token_for("alice", "team"), "chat_id": "other"}, "chat_id", "mismatch"),
        ({"context_token": token_for("alice"), "chat_id": "team"}, "chat_id", "mismatch"),
        ({"context_token": token_for("alice", ttl=60, now=1_000_000)}, "context_token", "expired"),
        ({"context_token": mint_token(OTHER_SECRET, "alice")}, "context_token", "signature"),
        ({"context_token": "garbage"}, "context_token", "format"),
        ({"context_token": ""}, "context_token", "missing"),
        (
            {"context_token": token_for("alice", "team", chat_type="group"), "chat_type": "private"},
            "chat_type",
            "mismatch",
        ),
        (
            {"context_token": token_for("alice", source_username="al"), "source_username": "bo"},
            "source_username",
            "mismatch",
        ),
        (
            {"context_token": token_for("alice", source_display_name="Al"), "source_display_name": "Bo"},
            "source_display_name",
            "mismatch",
        ),
        ({"context_token": token_for("alice", message_id="m1"), "message_id": "m2"}, "message_id", "mismatch"),
    ],
)
@pytest.mark.parametrize("method", ["memory.add", "memory.search", "memory.list", "memory.delete"])
async def test_every_memory_method_refuses_without_a_valid_matching_token(
    peer: NdjsonPeer, method: str, params: dict[str, Any], field: str, code: str
) -> None:
    args = {"memory.add": {"content": "x"}, "memory.search": {"query": "x"}, "memory.delete": {"memory_id": "0" * 26}}
    error = await refused(peer, method, {**params, **args.get(method, {})})
    assert (error["data"]["field"], error["data"]["code"]) == (field, code)


#: A call each method would answer, but for the caller's identity ({id}: Alice's memory).
CALLS: dict[str, dict[str, Any]] = {
    "memory.add": {"content": "planted"},
    "memory.search": {"query": "tea"},
    "memory.list": {},
    "memory.get": {"memory_id": "{id}"},
    "memory.delete": {"memory_id": "{id}"},
    "memory.pin": {"memory_id": "{id}"},
    "memory.unpin": {"memory_id": "{id}"},
    "memory.history": {"memory_id": "{id}"},
    "memory.forget_all": {"confirm": True},
    "memory.observe": {"messages": [{"role": "user", "content": "planted"}]},
    "memory.extract": {"message_id": "m1"},
    "memory.extract_from_messages": {"messages": [{"role": "user", "content": "I like tea"}]},
    "memory.forget_person": {"person": "Sarah"},
    "memory.context": {"message": "what about Sarah?"},
    "memory.summary": {},
    "person.list": {},
    "person.get": {"name": "Sarah"},
    "person.merge": {"from": "Tom", "into": "Sarah"},
    "person.alias": {"name": "Sarah", "alias": "Sal"},
}


async def test_every_method_but_health_needs_a_valid_token_of_the_caller(token_daemon: Daemon) -> None:
    assert token_daemon.server is not None
    # A method added later must be listed in CALLS, so it is checked here too.
    assert set(token_daemon.server.table.names()) == {*CALLS, "system.health"}
    peer = await NdjsonPeer.connect(token_daemon.config.socket_path)
    alice = {"context_token": token_for("alice")}
    kept = await call_ok(
        peer, "memory.add", {**alice, "content": "Sarah and Tom like green tea", "subjects": ["Sarah", "Tom"]}
    )
    before = await call_ok(peer, "person.list", alice)
    for method, template in CALLS.items():
        params = {key: kept["id"] if value == "{id}" else value for key, value in template.items()}
        for identity, code in (
            ({"user_id": "alice"}, "missing"),
            ({"context_token": token_for("bob"), "user_id": "alice"}, "mismatch"),
            ({"context_token": token_for("alice", ttl=60, now=1_000_000)}, "expired"),
            ({"context_token": mint_token(OTHER_SECRET, "alice")}, "signature"),
        ):
            error = await refused(peer, method, {**params, **identity})
            assert error["data"]["code"] == code, (method, identity, error)
    # None of the refused calls did anything: Alice's memory and people are as they were.
    listed = await call_ok(peer, "memory.list", alice)
    assert [(m["id"], m["pinned"], m["content"]) for m in listed] == [
        (kept["id"], False, "Sarah and Tom like green tea")
    ]
    assert await call_ok(peer, "person.list", alice) == before
    assert await call_ok(peer, "memory.list", {"context_token": token_for("bob")}) == []


async def test_the_daemon_allows_thirty_seconds_of_clock_skew_and_no_more(peer: NdjsonPeer) -> None:
    now = time.time()
    # exp 20 s ago and iat 20 s ahead are skew; 45 s is not (10 s of margin for a slow machine).
    for ttl, issued, accepted in (
        (60, now - 80, True),
        (60, now - 105, False),
        (600, now + 20, True),
        (600, now + 45, False),
    ):
        params = {"context_token": token_for("alice", ttl=ttl, now=issued)}
        if accepted:
            assert await call_ok(peer, "memory.list", params) == []
        else:
            error = await refused(peer, "memory.list", params)
            assert error["data"]["code"] == ("expired" if issued < now else "not_yet_valid")


async def test_the_claims_are_the_provenance_and_unclaimed_params_are_ignored(peer: NdjsonPeer) -> None:
    claimed = {"context_token": token_for("alice", "team", chat_type="group", source_username="al", message_id="m1")}
    added = await call_ok(peer, "memory.add", {**claimed, "chat_type": "group", "content": "al said so"})
    record = await call_ok(peer, "memory.get", {**claimed, "memory_id": added["id"]})
    assert (record["chat_type"], record["source_username"], record["source_message_id"]) == ("group", "al", "m1")
    # A token without routing claims: the sandbox's routing params are not believed (as in ash).
    bare = {"context_token": token_for("alice", "team")}
    params = {"chat_type": "private", "source_username": "the-ceo", "message_id": "m9", "content": "who said it?"}
    record = await call_ok(
        peer, "memory.get", {**bare, "memory_id": (await call_ok(peer, "memory.add", {**bare, **params}))["id"]}
    )
    assert (record["chat_type"], record["source_username"], record["source_message_id"], record["trust"]) == (
        None,
        None,
        None,
        "unknown",
    )


async def test_nothing_is_stored_by_a_refused_add(peer: NdjsonPeer) -> None:
    await refused(peer, "memory.add", {"context_token": token_for("alice"), "user_id": "bob", "content": "sneaky"})
    assert await call_ok(peer, "memory.list", {"context_token": token_for("bob")}) == []
    assert await call_ok(peer, "memory.list", {"context_token": token_for("alice")}) == []


async def test_another_users_memory_cannot_be_deleted_with_any_ids(peer: NdjsonPeer) -> None:
    bobs = await call_ok(peer, "memory.add", {"context_token": token_for("bob"), "content": "bob's secret"})
    alice = {"context_token": token_for("alice")}
    assert await call_ok(peer, "memory.delete", {**alice, "memory_id": bobs["id"]}) == {"deleted": False, "id": None}
    await refused(peer, "memory.delete", {**alice, "user_id": "bob", "memory_id": bobs["id"]})
    assert len(await call_ok(peer, "memory.list", {"context_token": token_for("bob")})) == 1


async def test_health_needs_no_token_but_shows_untrusted_callers_liveness_only(peer: NdjsonPeer) -> None:
    health = await call_ok(peer, "system.health", {})
    assert set(health) == {"status", "version", "uptime_seconds"}
    assert set(await call_ok(peer, "system.health", {"context_token": token_for("alice")})) == set(health)


async def test_trusted_uid_may_omit_the_token_and_sees_full_health(short_tmp: Path, nursery: trio.Nursery) -> None:
    instance = await start(short_tmp, nursery, trusted_uids=[os.getuid()])
    peer = await NdjsonPeer.connect(instance.config.socket_path)
    await call_ok(peer, "memory.add", {"user_id": "carol", "chat_id": "ops", "content": "host-side fact"})
    assert len(await call_ok(peer, "memory.list", {"context_token": token_for("carol")})) == 1
    # A token is still checked when a trusted peer sends one.
    await refused(peer, "memory.list", {"context_token": "garbage"})
    error = (await peer.call("memory.list", {}))["error"]
    assert (error["code"], error["data"]["field"]) == (-32602, "user_id")
    health = await call_ok(peer, "system.health", {})
    assert health["counts"] and health["server"]["connections_by_uid"][str(os.getuid())] >= 1


async def test_trust_mode_needs_user_id_and_ignores_tokens(daemon: Daemon) -> None:
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    error = (await peer.call("memory.list", {"context_token": token_for("alice")}))["error"]
    assert (error["code"], error["data"]["field"]) == (-32602, "user_id")
    assert await call_ok(peer, "memory.list", {"user_id": "alice", "context_token": "not checked"}) == []
    health = await call_ok(peer, "system.health", {})
    assert health["server"]["connections_by_uid"][str(os.getuid())] >= 1


async def test_the_client_acts_on_a_token_alone(token_daemon: Daemon) -> None:
    path = str(token_daemon.config.socket_path)
    async with AsyncMemoryClient(path, context_token=token_for("dave", "den")) as client:
        assert (client.user_id, client.chat_id) == ("dave", "den")
        added = await client.add("dave owns a kayak", shared=True)
        assert added["scope"] == "group"
        assert [h["content"] for h in await client.search("kayak")] == ["dave owns a kayak"]
    async with AsyncMemoryClient(path, user_id="erin", context_token=token_for("dave", "den")) as client:
        with pytest.raises(Unauthorized) as caught:
            await client.list()
        assert caught.value.data["field"] == "user_id"


async def test_refusals_are_logged_without_the_token_or_secret(
    peer: NdjsonPeer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="memoryd")
    forged = mint_token(OTHER_SECRET, "alice")
    await refused(peer, "memory.list", {"context_token": forged})
    await call_ok(peer, "memory.list", {"context_token": token_for("alice")})
    assert "auth.refused" in caplog.text
    assert forged not in caplog.text and SECRET not in caplog.text and OTHER_SECRET not in caplog.text
    refusal = next(r for r in caplog.records if r.getMessage() == "auth.refused")
    assert refusal.fields["code"] == "signature" and refusal.fields["uid"] == os.getuid()  # type: ignore[attr-defined]


async def test_a_deeply_nested_token_is_refused_and_logged_as_a_refusal(
    peer: NdjsonPeer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="memoryd")
    deep = base64.urlsafe_b64encode(b"[" * 3000 + b"]" * 3000).rstrip(b"=").decode()
    error = await refused(peer, "memory.list", {"context_token": f"{deep}.e30.c2ln"})
    assert error["data"]["code"] == "decode"
    assert any(r.getMessage() == "auth.refused" for r in caplog.records)
    assert not any(r.levelno >= logging.ERROR for r in caplog.records)


async def test_peer_credentials_are_logged_at_debug_per_connection(
    token_daemon: Daemon, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="memoryd")
    peer = await NdjsonPeer.connect(token_daemon.config.socket_path)
    await call_ok(peer, "system.health", {})
    opened = [r for r in caplog.records if r.getMessage() == "connection.open"]
    assert opened and opened[-1].levelno == logging.DEBUG
    assert {key: opened[-1].fields[key] for key in ("pid", "uid", "gid")} == {  # type: ignore[attr-defined]
        "pid": os.getpid(),
        "uid": os.getuid(),
        "gid": os.getgid(),
    }


def test_auth_config_comes_from_the_environment_with_a_uid_list() -> None:
    config = load_config(
        environ={
            "MEMORYD_AUTH_MODE": "token",
            "MEMORYD_AUTH_TOKEN_SECRET": SECRET,
            "MEMORYD_AUTH_TRUSTED_UIDS": "0, 1000",
        }
    )
    assert (config.auth.mode, config.auth.trusted_uids) == ("token", [0, 1000])


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"MEMORYD_AUTH_MODE": "token"}, "needs auth.token_secret"),
        ({"MEMORYD_AUTH_MODE": "tokens", "MEMORYD_AUTH_TOKEN_SECRET": SECRET}, "auth.mode"),
        ({"MEMORYD_AUTH_TRUSTED_UIDS": "root"}, "auth.trusted_uids"),
        ({"MEMORYD_AUTH_TRUSTED_UIDS": "-1"}, "auth.trusted_uids"),
        ({"MEMORYD_AUTH_TOKEN_SECRET": SECRET, "MEMORYD_AUTH_TOKEN_SECRET_FILE": "/x"}, "not both"),
    ],
)
def test_bad_auth_config_names_the_key(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(environ=environ)


def test_a_short_or_unreadable_secret_stops_start_up(short_tmp: Path) -> None:
    with pytest.raises(ConfigError, match="at least 16"):
        Daemon(make_config(short_tmp, auth={"mode": "token", "token_secret": "short"}))
    with pytest.raises(ConfigError, match="cannot read") as caught:
        Daemon(make_config(short_tmp, auth={"mode": "token", "token_secret_file": str(short_tmp / "missing")}))
    assert SECRET not in str(caught.value)


async def test_the_secret_can_live_in_a_file(short_tmp: Path, nursery: trio.Nursery) -> None:
    secret_file = short_tmp / "secret"
    secret_file.write_text(SECRET + "\n")
    secret_file.chmod(0o600)
    instance = Daemon(make_config(short_tmp, auth={"mode": "token", "token_secret_file": str(secret_file)}))
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(instance.config.socket_path)
    assert await call_ok(peer, "memory.list", {"context_token": token_for("alice")}) == []


def run_memoryd(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("MEMORYD_")}
    command = [sys.executable, "-m", "memoryd", *args]
    return subprocess.run(
        command, env={**clean, **env}, cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )


def test_memoryd_token_prints_a_token_for_the_configured_secret() -> None:
    done = run_memoryd(
        "token",
        "--user",
        "alice",
        "--chat",
        "team",
        "--ttl",
        "2h",
        env={
            "MEMORYD_AUTH_MODE": "token",
            "MEMORYD_AUTH_TOKEN_SECRET": SECRET,
        },
    )
    assert done.returncode == 0, done.stderr
    claims = verify_token(done.stdout.strip(), SECRET)
    assert (claims.user_id, claims.chat_id, claims.expires_at - claims.issued_at) == ("alice", "team", 7200)
    assert SECRET not in done.stderr
    assert claims.chat_type is None
    routed = run_memoryd(
        "token",
        "--user",
        "alice",
        "--chat",
        "team",
        "--chat-type",
        "group",
        "--source-username",
        "al",
        "--source-display-name",
        "Alice",
        "--message-id",
        "m-7",
        env={"MEMORYD_AUTH_TOKEN_SECRET": SECRET},
    )
    claims = verify_token(routed.stdout.strip(), SECRET)
    assert (claims.chat_type, claims.source_username, claims.source_display_name, claims.message_id) == (
        "group",
        "al",
        "Alice",
        "m-7",
    )


def test_memoryd_token_refuses_bad_input_with_usage_errors(short_tmp: Path) -> None:
    assert (
        run_memoryd("token", "--user", "alice", "--ttl", "soon", env={"MEMORYD_AUTH_TOKEN_SECRET": SECRET}).returncode
        == 2
    )
    no_secret = run_memoryd("token", "--user", "alice", env={})
    assert no_secret.returncode == 2 and "token_secret" in no_secret.stderr
    assert run_memoryd("token", env={"MEMORYD_AUTH_TOKEN_SECRET": SECRET}).returncode == 2
    secret_file = short_tmp / "secret"
    secret_file.write_text(SECRET)
    from_file = run_memoryd("token", "--user", "bob", env={"MEMORYD_AUTH_TOKEN_SECRET_FILE": str(secret_file)})
    assert verify_token(from_file.stdout.strip(), SECRET).user_id == "bob"
    assert "trust" in from_file.stderr  # a note: the daemon will not check it in trust mode


def test_memoryd_config_never_prints_the_secret() -> None:
    done = run_memoryd("config", env={"MEMORYD_AUTH_MODE": "token", "MEMORYD_AUTH_TOKEN_SECRET": SECRET})
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout and '"token_secret": "***"' in done.stdout


def test_memoryd_token_lasts_fifteen_minutes_unless_told_otherwise() -> None:
    done = run_memoryd("token", "--user", "alice", env={"MEMORYD_AUTH_TOKEN_SECRET": SECRET})
    assert done.returncode == 0, done.stderr
    claims = verify_token(done.stdout.strip(), SECRET)
    assert (claims.user_id, claims.chat_id, claims.expires_at - claims.issued_at) == ("alice", None, 15 * 60)
    assert done.stdout.count("\n") == 1  # the token alone, for $(memoryd token ...)
