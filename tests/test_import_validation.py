"""`memoryd import` refuses what memory.add refuses, line by line, naming the line and the field;
what it does import, a real daemon then lists and searches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.server.daemon import Daemon
from tests.admin_cli import good_line, memoryd, text
from tests.conftest import make_config
from tests.store_helpers import sql
from tests.wire import NdjsonPeer, call_error, call_ok

GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PERSON = {
    "record": "person",
    "id": "01JCCCCCCCCCCCCCCCCCCCCC01",
    "owner": "carol",
    "name": "Sarah",
    "aliases": [],
    "relationship": None,
    "created_at": "2025-01-02T03:04:05.678Z",
    "updated_at": "2025-01-02T03:04:05.678Z",
    "memories": [],
}
HEADER = b'{"format":"memoryd-export","version":2,"exported_at":"2025-01-02T03:04:05.678Z","user":null}\n'


def person(**changes: Any) -> bytes:
    return json.dumps({**PERSON, **changes}).encode() + b"\n"


BAD_LINES = [
    pytest.param(good_line(3, content="x" * 100_000), "content", id="100KB-content"),
    pytest.param(good_line(3, content="x" * 5_000_000), "content", id="5MB-content"),
    pytest.param(good_line(3, owner="o" * 300), "owner", id="300-char-owner"),
    pytest.param(good_line(3, owner="   "), "owner", id="blank-owner"),
    pytest.param(good_line(3, scope="group", chat_id="c" * 300), "chat_id", id="300-char-chat"),
    pytest.param(good_line(3, subjects=[f"P{i}" for i in range(10_000)]), "subjects", id="10000-subjects"),
    pytest.param(good_line(3, subjects=[f"P{i}" for i in range(33)]), "subjects", id="33-subjects"),
    pytest.param(good_line(3, subjects=["n" * 201]), "subjects[0]", id="long-subject"),
    pytest.param(good_line(3, metadata={"blob": "m" * 1_000_000}), "metadata", id="1MB-metadata"),
    pytest.param(good_line(3, metadata={"blob": "m" * 5000}), "metadata", id="5KB-metadata"),
    pytest.param(good_line(3, source="s" * 65), "source", id="long-source"),
    pytest.param(good_line(3, key="k" * 201), "key", id="long-key"),
    pytest.param(good_line(3, content=f"deploy token {GITHUB_TOKEN}"), "content", id="secret-content"),
    pytest.param(
        good_line(3, metadata={"note": "DATABASE_PASSWORD=Sup3rS3cret!2024"}), "metadata", id="secret-metadata"
    ),
    pytest.param(good_line(3, subjects=[GITHUB_TOKEN]), "subjects[0]", id="secret-subject"),
    pytest.param(good_line(3, key=GITHUB_TOKEN), "key", id="secret-key"),
    pytest.param(good_line(3, source_session=f"s-{GITHUB_TOKEN}"), "source_session", id="secret-session"),
    pytest.param(person(owner="o" * 300), "owner", id="person-300-char-owner"),
    pytest.param(person(name="n" * 201), "name", id="person-long-name"),
    pytest.param(person(aliases=["a" * 201]), "aliases[0]", id="person-long-alias"),
]


@pytest.mark.parametrize(("bad_line", "field"), BAD_LINES)
def test_what_memory_add_refuses_is_reported_by_line_and_field_and_nothing_imported(
    tmp_path: Path, bad_line: bytes, field: str
) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(HEADER + good_line(1) + bad_line + good_line(4))
    done = memoryd("import", str(dump), data_dir=tmp_path / "data")
    err = done.stderr.decode()
    assert done.returncode == 1, text(done)
    assert f"line 3: {field} " in err and "nothing imported" in err, err
    assert GITHUB_TOKEN not in err and "Sup3rS3cret" not in err
    assert not (tmp_path / "data").exists() or sql(
        tmp_path / "data" / "memoryd.db", "SELECT count(*) FROM memories"
    ) == [(0,)]


def test_the_configured_subjects_bound_applies_to_an_import(tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(HEADER + good_line(1, subjects=["Ann", "Ben", "Cid"]))
    env = {"MEMORYD_LIMITS_MAX_SUBJECTS_PER_MEMORY": "2"}
    done = memoryd("import", str(dump), data_dir=tmp_path / "data", env=env)
    assert done.returncode == 1 and "line 2: subjects " in done.stderr.decode(), text(done)


async def test_an_import_at_the_limits_is_served_and_redact_mode_redacts(tmp_path: Path, nursery: trio.Nursery) -> None:
    data = tmp_path / "data"
    biggest = "y" * 16 * 1024
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(
        HEADER
        + good_line(1, content=biggest, subjects=[f"P{i}" for i in range(32)], metadata={"m": "z" * 4000})
        + good_line(2, content=f"deploy token {GITHUB_TOKEN} for the CI", metadata={"note": f"{GITHUB_TOKEN}"})
    )
    redact = {"MEMORYD_EXTRACTION_SECRETS": "redact"}
    # A session key is an identifier: redacting it would change which session it names.
    keyed = tmp_path / "keyed.jsonl"
    keyed.write_bytes(HEADER + good_line(1, source_session=GITHUB_TOKEN))
    refused = memoryd("import", str(keyed), data_dir=data, env=redact)
    assert refused.returncode == 1 and "line 2: source_session " in refused.stderr.decode(), text(refused)
    done = memoryd("import", str(dump), data_dir=data, env=redact)
    assert done.returncode == 0, text(done)
    instance = Daemon(make_config(tmp_path, data_dir=str(data), socket=str(tmp_path / "s.sock")))
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(instance.config.socket_path)
    listed = await call_ok(peer, "memory.list", {"user_id": "carol"})
    assert sorted(len(m["content"]) for m in listed)[-1] == len(biggest)
    redacted = [m for m in listed if "deploy token" in m["content"]][0]
    assert GITHUB_TOKEN not in json.dumps(redacted) and "[redacted]" in redacted["content"]
    hits = await call_ok(peer, "memory.search", {"user_id": "carol", "query": "deploy token"})
    assert [h["id"] for h in hits] == [redacted["id"]]


async def test_people_past_max_people_per_owner_are_refused_by_line_and_the_rest_imported(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    data = tmp_path / "data"
    dump = tmp_path / "dump.jsonl"
    names = ["Ann", "Ben", "Cid"]
    dump.write_bytes(
        HEADER
        + b"".join(good_line(i + 1, content=f"lunch with {name}", subjects=[name]) for i, name in enumerate(names))
        + b"".join(
            person(
                id=f"01JCCCCCCCCCCCCCCCCCCCCC{i + 1:02d}", name=name, memories=[f"01JBBBBBBBBBBBBBBBBBBBBB{i + 1:02d}"]
            )
            for i, name in enumerate(names)
        )
    )
    env = {"MEMORYD_LIMITS_MAX_PEOPLE_PER_OWNER": "2"}
    done = memoryd("import", str(dump), data_dir=data, env=env)
    err = done.stderr.decode()
    # Cid's line (the file's 7th) would be carol's third person: refused by number; the rest went in.
    assert done.returncode == 1, text(done)
    assert "line 7: person 01JCCCCCCCCCCCCCCCCCCCCC03 not imported" in err and "max_people_per_owner" in err, err
    assert "imported 3 of 3 memories" in done.stdout.decode() and "imported 2 people" in done.stdout.decode()
    instance = Daemon(
        make_config(tmp_path, data_dir=str(data), socket=str(tmp_path / "s.sock"), limits={"max_people_per_owner": 2})
    )
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(instance.config.socket_path)
    carol = {"user_id": "carol"}
    assert sorted(p["name"] for p in await call_ok(peer, "person.list", carol)) == ["Ann", "Ben"]
    assert len(await call_ok(peer, "memory.list", carol)) == 3
    # The live path agrees: carol is at her bound, so a new name is refused there too.
    error = await call_error(peer, "memory.add", {**carol, "content": "tea", "subjects": ["Cid"]})
    assert error["code"] == -32602 and error["data"]["field"] == "subjects[0]"
    # Importing the same file again with room for Cid brings him in, and only him.
    again = memoryd("import", str(dump), data_dir=data, env={"MEMORYD_LIMITS_MAX_PEOPLE_PER_OWNER": "3"})
    assert again.returncode == 0, text(again)
    assert "imported 1 people (2 already present" in again.stdout.decode()
