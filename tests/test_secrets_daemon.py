"""The secrets filter through a real daemon: every stored text field of memory.add is screened,
observed messages are stored redacted, and the filter catches a built set of credentials while
passing ordinary sentences (tests/data/secrets_corpus.json)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import apsw
import pytest
import trio

from memoryd.secrets import REDACTED, scan
from memoryd.server.daemon import Daemon
from tests.conftest import make_config
from tests.wire import NdjsonPeer, call_error, call_ok

CORPUS = json.loads((Path(__file__).parent / "data" / "secrets_corpus.json").read_text())
# Built from parts so that no scanner of this repository mistakes the fixtures for leaks.
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
ALICE = {"user_id": "alice"}


def leaked(secret: str, text: str) -> bool:
    """Any 8 characters of ``secret`` left in ``text`` (all of it when it is shorter)."""
    if len(secret) < 8:
        return secret in text
    return any(secret[i : i + 8] in text for i in range(len(secret) - 7))


def test_the_credential_set_is_caught_and_ordinary_sentences_pass() -> None:
    credentials, ordinary = CORPUS["credentials"], CORPUS["ordinary"]
    assert len(credentials) >= 50 and len(ordinary) >= 100
    caught = [c for c in credentials if not scan(c["text"]).clean and not leaked(c["secret"], scan(c["text"]).text)]
    false_positives = [text for text in ordinary if not scan(text).clean]
    rate = len(caught) / len(credentials)
    print(
        f"\nsecrets filter: {len(caught)}/{len(credentials)} credentials caught ({rate:.1%}), "
        f"{len(false_positives)}/{len(ordinary)} false positives"
    )
    assert rate >= 0.95, [c["text"] for c in credentials if c not in caught]
    assert false_positives == []


EVASIONS = [
    pytest.param("DATABASE_PASSWORD=Sup3rS3cret!2024", "Sup3rS3cret!2024", id="env-password"),
    pytest.param(
        "SENTRY_AUTH_TOKEN=" + "8c2f" + "1e9a7b3d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8",
        "1e9a7b3d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8",
        id="env-token",
    ),
    pytest.param(f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, id="aws-secret-underscored-name"),
    pytest.param(f"my token {GITHUB_TOKEN[:12]}\u200b{GITHUB_TOKEN[12:]}", GITHUB_TOKEN[12:], id="zero-width"),
    pytest.param(
        "my token " + "".join(chr(ord(c) + 0xFEE0) for c in GITHUB_TOKEN),
        "".join(chr(ord(c) + 0xFEE0) for c in GITHUB_TOKEN),
        id="fullwidth",
    ),
    pytest.param(f"my token {GITHUB_TOKEN[:20]}\n{GITHUB_TOKEN[20:]}", GITHUB_TOKEN[20:], id="line-break-in-key"),
    pytest.param(
        "blob " + base64.b64encode(f"aws_secret_access_key={AWS_SECRET}".encode()).decode(),
        base64.b64encode(f"aws_secret_access_key={AWS_SECRET}".encode()).decode(),
        id="base64",
    ),
]


async def start(short_tmp: Path, nursery: trio.Nursery, mode: str) -> NdjsonPeer:
    instance = Daemon(make_config(short_tmp, extraction={"secrets": mode}))
    await nursery.start(instance.run)
    return await NdjsonPeer.connect(instance.config.socket_path)


@pytest.mark.parametrize(("text", "secret"), EVASIONS)
async def test_evasions_are_refused_and_redacted_without_a_tail(
    short_tmp: Path, nursery: trio.Nursery, text: str, secret: str
) -> None:
    peer = await start(short_tmp, nursery, "redact")
    added = await call_ok(peer, "memory.add", {**ALICE, "content": text})
    got = await call_ok(peer, "memory.get", {**ALICE, "memory_id": added["id"]})
    assert REDACTED in got["content"]
    assert not leaked(secret, got["content"]), got["content"]


@pytest.mark.parametrize(("text", "secret"), EVASIONS)
async def test_evasions_are_refused_in_refuse_mode(
    short_tmp: Path, nursery: trio.Nursery, text: str, secret: str
) -> None:
    peer = await start(short_tmp, nursery, "refuse")
    error = await call_error(peer, "memory.add", {**ALICE, "content": text})
    assert error["code"] == -32602 and error["data"]["field"] == "content"
    assert secret not in json.dumps(error)


FIELDS: list[Any] = [
    pytest.param({"metadata": {"note": f"deploy with {GITHUB_TOKEN}"}}, "metadata", id="metadata-value"),
    pytest.param({"metadata": {f"{GITHUB_TOKEN}": "x"}}, "metadata", id="metadata-key"),
    pytest.param(
        {"metadata": {"list": [1, {"deep": "DB_PASSWORD=Sup3rS3cret!2024"}]}}, "metadata", id="metadata-nested"
    ),
    pytest.param({"subjects": ["Tom", GITHUB_TOKEN]}, "subjects[1]", id="subject"),
    pytest.param({"source": GITHUB_TOKEN[:40]}, "source", id="source"),
    pytest.param({"key": f"token {GITHUB_TOKEN}"}, "key", id="key"),
]


@pytest.mark.parametrize(("extra", "field"), FIELDS)
async def test_every_stored_text_field_is_screened(
    short_tmp: Path, nursery: trio.Nursery, extra: dict[str, Any], field: str
) -> None:
    peer = await start(short_tmp, nursery, "refuse")
    error = await call_error(peer, "memory.add", {**ALICE, "content": "ordinary words", **extra})
    assert error["code"] == -32602 and error["data"]["field"] == field
    listed = await call_ok(peer, "memory.list", ALICE)
    assert listed == []


async def test_redact_mode_redacts_every_field(short_tmp: Path, nursery: trio.Nursery) -> None:
    peer = await start(short_tmp, nursery, "redact")
    added = await call_ok(
        peer,
        "memory.add",
        {
            **ALICE,
            "content": "ordinary words",
            "subjects": ["Tom", GITHUB_TOKEN],
            "metadata": {GITHUB_TOKEN: "DB_PASSWORD=Sup3rS3cret!2024"},
        },
    )
    got = await call_ok(peer, "memory.get", {**ALICE, "memory_id": added["id"]})
    stored = json.dumps(got)
    assert not leaked(GITHUB_TOKEN, stored) and "Sup3rS3cret" not in stored
    assert REDACTED in got["subjects"] and REDACTED in json.dumps(got["metadata"])


async def test_observed_messages_are_stored_redacted(short_tmp: Path, nursery: trio.Nursery) -> None:
    instance = Daemon(make_config(short_tmp))
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(instance.config.socket_path)
    messages = [
        {"role": "user", "content": f"here: aws_secret_access_key = {AWS_SECRET}"},
        {"role": "user", "content": "DATABASE_PASSWORD=Sup3rS3cret!2024"},
        {"role": "assistant", "content": "Noted, the meeting is at noon."},
    ]
    result = await call_ok(peer, "memory.observe", {**ALICE, "session_key": "s1", "messages": messages})
    assert result["accepted"] == 3
    db = apsw.Connection(str(instance.config.db_path), flags=apsw.SQLITE_OPEN_READONLY)
    stored = [row[0] for row in db.execute("SELECT content FROM observed_messages ORDER BY rowid")]
    assert len(stored) == 3
    assert not leaked(AWS_SECRET, stored[0]) and REDACTED in stored[0]
    assert "Sup3rS3cret" not in stored[1]
    assert stored[2] == "Noted, the meeting is at noon."
    health = await call_ok(peer, "system.health", {})
    assert health["secrets"]["redacted"] == 2


async def test_lookalike_letters_names_and_aliases_are_screened(short_tmp: Path, nursery: trio.Nursery) -> None:
    """Cyrillic letters drawn like Latin ones hide nothing; an observed message's speaker names
    are stored redacted; person.alias refuses a credential."""
    peer = await start(short_tmp, nursery, "refuse")
    cyrillic = "\u0410\u041a\u0406\u0410" + "IOSFODNN7EXAMPLE"  # "AKIA..." in Cyrillic capitals
    error = await call_error(peer, "memory.add", {**ALICE, "content": f"key {cyrillic}"})
    assert error["data"]["field"] == "content"
    await call_ok(peer, "memory.add", {**ALICE, "content": "lunch with Tom", "subjects": ["Tom"]})
    error = await call_error(peer, "person.alias", {**ALICE, "name": "Tom", "alias": GITHUB_TOKEN})
    assert error["code"] == -32602 and error["data"]["field"] == "alias"
    message = {"role": "user", "content": "hi", "username": GITHUB_TOKEN, "display_name": f"pw: {AWS_SECRET}"}
    await call_ok(peer, "memory.observe", {**ALICE, "session_key": "s", "messages": [message]})
    people = await call_ok(peer, "person.list", ALICE)
    assert GITHUB_TOKEN not in json.dumps(people)
    db = apsw.Connection(str(make_config(short_tmp).db_path), flags=apsw.SQLITE_OPEN_READONLY)
    stored = db.execute("SELECT username, display_name FROM observed_messages").fetchall()
    assert len(stored) == 1 and not leaked(GITHUB_TOKEN, str(stored)) and not leaked(AWS_SECRET, str(stored))


@pytest.mark.parametrize("mode", ["refuse", "redact"])
async def test_a_session_key_holding_a_credential_is_refused_and_nothing_stored(
    short_tmp: Path, nursery: trio.Nursery, mode: str
) -> None:
    """A session key is an identifier: redacting it would make every credential-keyed session
    the same one, so it is refused in either mode, naming the field, and nothing is stored."""
    peer = await start(short_tmp, nursery, mode)
    message = {"role": "user", "content": "the meeting moved to noon"}
    for key in (GITHUB_TOKEN, "DATABASE_PASSWORD=Sup3rS3cret!2024", f"aws_secret_access_key = {AWS_SECRET}"):
        error = await call_error(peer, "memory.observe", {**ALICE, "session_key": key, "messages": [message]})
        assert error["code"] == -32602 and error["data"]["field"] == "session_key", error
        assert not leaked(GITHUB_TOKEN, json.dumps(error)) and "Sup3rS3cret" not in json.dumps(error)
    # An ordinary key is stored as sent.
    await call_ok(peer, "memory.observe", {**ALICE, "session_key": "telegram:42:2025-06", "messages": [message]})
    db_path = make_config(short_tmp).db_path
    db = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    assert db.execute("SELECT count(*) FROM observed_messages").fetchone() == (1,)
    # Not a byte of the refused keys in the database or its WAL; the ordinary one is there.
    files = [db_path, db_path.with_name(db_path.name + "-wal")]
    everything = b"".join(f.read_bytes() for f in files if f.exists()).decode("latin-1")
    assert "telegram:42:2025-06" in everything
    assert not leaked(GITHUB_TOKEN, everything) and "Sup3rS3cret" not in everything
    assert not leaked(AWS_SECRET, everything)
    health = await call_ok(peer, "system.health", {})
    assert health["secrets"]["refused"] == 3
