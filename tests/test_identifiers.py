"""One identifier rule for user ids, chat ids and token subjects: the same refusal in trust and
token mode, in the client, the sandbox CLI, token minting, and escaped admin output.

Nothing is trimmed or rewritten: an id that could be mistaken for another ("alice " for
"alice", a zero-width space, a no-break space) is refused with the field named.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.server.daemon import Daemon
from memoryd.store.sqlite import Store
from memoryd_client import InvalidIdentity, MemoryClient, mint_token
from memoryd_client.identifiers import MAX_IDENTIFIER_CHARS, identifier_problem
from tests.admin_cli import memoryd, text
from tests.conftest import REPO, make_config
from tests.store_helpers import note
from tests.wire import NdjsonPeer, call_error, call_ok

SECRET = "5f1e0c3a9b7d2e4f6a8c0b1d3e5f7a9c1b3d5e7f9a0c2e4f6a8b0d2f4e6a8c0b"

#: Each would otherwise be a user of its own that looks like another (or like nobody).
BAD_IDS = [
    "",
    " ",
    "\t",
    "   ",
    "\u200b",
    "\u00a0",
    "\u3000",
    "alice ",
    " alice",
    "alice\t",
    "alice\u00a0",
    "alice\u3000",
    "alice\x00",
    "alice\x1b[31mred",
    "ali\u200bce",
    "alice\ufeff",
    "alice\u2028",
    "alice\n",
    "\u3164",
    "alice\ud800",
    "e\u0301",
    "x" * (MAX_IDENTIFIER_CHARS + 1),
]
GOOD_IDS = ["alice", "Alice Smith", "-1001234567890", "user@example.com", "Zoë", "漢字", "x" * MAX_IDENTIFIER_CHARS]
METHODS = [
    ("memory.add", {"content": "a note"}),
    ("memory.search", {"query": "note"}),
    ("memory.list", {}),
    ("memory.observe", {"messages": [{"role": "user", "content": "hi"}]}),
    ("person.list", {}),
    ("memory.context", {"message": "hi"}),
]


def b64url(data: bytes) -> str:
    """Unpadded base64url, as the token format writes each segment."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def forged(claims: dict[str, Any]) -> str:
    """A correctly signed token with exactly these claims (mint_token refuses bad ids)."""
    header = {"alg": "HS256", "typ": "ASH_CONTEXT", "ver": 1}

    def segment(value: dict[str, Any]) -> str:
        return b64url(json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8", "surrogatepass"))

    signing_input = f"{segment(header)}.{segment(claims)}"
    key = bytes.fromhex(SECRET)
    signature = hmac.new(key, signing_input.encode("ascii"), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


def claims_for(sub: str, **more: Any) -> dict[str, Any]:
    import time

    now = int(time.time())
    return {"ver": 1, "sub": sub, "iat": now, "exp": now + 600, "jti": "x", **more}


@pytest.mark.parametrize("value", GOOD_IDS + BAD_IDS, ids=repr)
def test_the_rule(value: str) -> None:
    assert (identifier_problem(value) is None) == (value in GOOD_IDS)


async def test_trust_mode_refuses_bad_user_and_chat_ids_naming_the_field(peer: NdjsonPeer) -> None:
    for bad in BAD_IDS:
        for method, params in METHODS:
            for field, who in (("user_id", {"user_id": bad}), ("chat_id", {"user_id": "alice", "chat_id": bad})):
                error = await call_error(peer, method, {**who, **params})
                assert error["code"] == -32602, (bad, method, error)
                assert error["data"]["field"] == field, (bad, method, error)
    # Nothing was stored for anyone, and alice is still alice.
    assert await call_ok(peer, "memory.list", {"user_id": "alice"}) == []
    for good in GOOD_IDS:
        await call_ok(peer, "memory.add", {"user_id": good, "chat_id": good, "content": "ok", "shared": True})


async def test_token_mode_refuses_bad_subjects_and_chat_claims(
    short_tmp: Path, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = Daemon(make_config(short_tmp, auth={"mode": "token", "token_secret": SECRET}))
    await nursery.start(daemon.run)
    peer = await NdjsonPeer.connect(daemon.config.socket_path)
    alice = {"context_token": mint_token(SECRET, "alice")}
    await call_ok(peer, "memory.add", {**alice, "content": "alice's own note"})
    with caplog.at_level(logging.INFO):
        for bad in [b for b in BAD_IDS if b]:
            for claims in (claims_for(bad), claims_for("alice", chat_id=bad)):
                for method, params in METHODS:
                    error = await call_error(peer, method, {"context_token": forged(claims), **params})
                    assert error["code"] == -32002, (bad, method, error)
                    assert error["data"]["field"] == "context_token" and error["data"]["code"] == "claims"
            # A sent id that breaks the rule never matches a claim either.
            error = await call_error(peer, "memory.list", {**alice, "user_id": bad or " "})
            assert error["code"] in (-32002, -32602)
        for name in ("chat_type", "source_username", "source_display_name", "message_id", "jti"):
            token = forged(claims_for("alice", **{name: "x\ud800"}))
            error = await call_error(peer, "memory.add", {"context_token": token, "content": "x"})
            assert error["code"] == -32002 and error["data"]["code"] == "claims", (name, error)
    assert not [r for r in caplog.records if r.exc_info], "a refused token must not log a traceback"
    # "alice " never acted as alice: her memories are still exactly her own one.
    assert [r["content"] for r in await call_ok(peer, "memory.list", alice)] == ["alice's own note"]
    # The cap is the same as trust mode's.
    long_ok = forged(claims_for("x" * MAX_IDENTIFIER_CHARS))
    await call_ok(peer, "memory.list", {"context_token": long_ok})
    daemon.request_stop()


def test_minting_refuses_instead_of_trimming() -> None:
    for bad in BAD_IDS:
        with pytest.raises(ValueError):
            mint_token(SECRET, bad)
        if bad:
            with pytest.raises(ValueError):
                mint_token(SECRET, "alice", bad)


async def test_the_client_and_the_cli_refuse_before_sending(daemon: Daemon) -> None:
    socket = str(daemon.config.socket_path)
    for bad in ("   ", "\u200b", "alice\u00a0", "alice\x1b[31m"):
        with pytest.raises(InvalidIdentity) as caught:
            await trio.to_thread.run_sync(lambda bad=bad: MemoryClient(user_id=bad, socket_path=socket).add("x"))
        assert caught.value.field == "user_id"
        with pytest.raises(InvalidIdentity):
            await trio.to_thread.run_sync(
                lambda bad=bad: MemoryClient(user_id="alice", chat_id=bad, socket_path=socket).add("x")
            )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": f"{REPO / 'client'}:{REPO / 'sandbox-cli'}",
            "MEMORYD_SOCKET": socket,
            "MEMORY_USER_ID": bad,
        }
        done = await trio.run_process(
            [sys.executable, "-m", "memory_cli", "add", "a note"],
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert done.returncode == 2, (bad, done.returncode, done.stderr)
        assert b"user_id" in done.stderr
    client = MemoryClient(user_id="alice", socket_path=socket)
    assert await trio.to_thread.run_sync(client.list) == []


async def test_admin_output_escapes_what_callers_chose(tmp_path: Path) -> None:
    """Ids stored before the rule existed (or by an import) reach `memoryd stats` escaped."""
    data = tmp_path / "data"
    data.mkdir()
    with Store(data / "memoryd.db", readers=1) as store:
        await store.memories.add(note("x", "alice\x1b[31mred\u200b", source="src\x07"))
    done = memoryd("stats", data_dir=data)
    assert done.returncode == 0, text(done)
    out = done.stdout.decode()
    assert "\x1b" not in out and "\x07" not in out and "\u200b" not in out
    assert "alice\\x1b[31mred\\u200b" in out and "src\\x07" in out
    exported = memoryd("export", "--user", "alice\x1b[31mred\u200b", data_dir=data)
    assert exported.returncode == 0 and b"\x1b" not in exported.stderr
