"""`memoryd export` / `import` keep what a daemon learned beside the memories: the people (names,
aliases, relationships, links) and what supersession looks up (attribute keys)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from memoryd.server.daemon import Daemon
from tests.admin_cli import export_lines, memoryd, text
from tests.conftest import make_config
from tests.wire import NdjsonPeer, call_ok

ALICE = {"user_id": "alice"}


@asynccontextmanager
async def serving(base: Path, data: Path) -> AsyncIterator[NdjsonPeer]:
    """A keyword-only daemon on ``data``, and a connection to it."""
    base.mkdir(parents=True, exist_ok=True)
    daemon = Daemon(make_config(base, data_dir=str(data)))
    async with trio.open_nursery() as nursery:
        path = await nursery.start(daemon.run)
        peer = await NdjsonPeer.connect(path)
        try:
            yield peer
        finally:
            await peer.aclose()
            daemon.request_stop()


async def add(peer: NdjsonPeer, content: str, user: str = "alice") -> dict[str, Any]:
    result: dict[str, Any] = await call_ok(peer, "memory.add", {"user_id": user, "content": content})
    return result


def import_file(data: Path, lines: list[bytes], dump: Path) -> str:
    dump.write_bytes(b"".join(lines))
    done = memoryd("import", str(dump), data_dir=data)
    assert done.returncode == 0, text(done)
    return done.stdout.decode()


async def test_people_and_supersession_survive_an_export_and_an_import(short_tmp: Path) -> None:
    source, target = short_tmp / "source", short_tmp / "target"
    async with serving(short_tmp / "a", source) as peer:
        await add(peer, "My wife's name is Sarah")
        italian = (await add(peer, "Sarah likes Italian food"))["id"]
        berlin = (await add(peer, "I live in Berlin"))["id"]
        await call_ok(peer, "person.alias", {**ALICE, "name": "Sarah", "alias": "Sari"})
        await add(peer, "My brother Tom lives in Toronto", user="bob")
        before = await call_ok(peer, "person.list", ALICE)
    lines = export_lines(source)
    people = [json.loads(line) for line in lines if b'"record":"person"' in line]
    assert {(p["owner"], p["name"]) for p in people} == {("alice", "Sarah"), ("bob", "Tom")}
    sarah = next(p for p in people if p["name"] == "Sarah")
    assert sarah["relationship"] == "wife" and "Sari" in sarah["aliases"] and italian in sarah["memories"]

    report = import_file(target, lines, short_tmp / "dump.jsonl")
    assert "imported 2 people (0 already present, 0 merged" in report
    assert export_lines(target)[1:] == lines[1:]  # the same bytes, people included
    async with serving(short_tmp / "b", target) as peer:
        assert await call_ok(peer, "person.list", ALICE) == before
        got = await call_ok(peer, "person.get", {**ALICE, "name": "Sari"})
        assert italian in [memory["id"] for memory in got["memories"]]
        # The imported "I live in Berlin" is still what a move replaces.
        moved = await add(peer, "I live in Paris")
        assert moved["superseded"] == [berlin]
        assert [p["name"] for p in await call_ok(peer, "person.list", {"user_id": "bob"})] == ["Tom"]


async def test_a_person_learned_again_under_another_id_takes_the_imported_names(short_tmp: Path) -> None:
    source, target = short_tmp / "source", short_tmp / "target"
    async with serving(short_tmp / "a", source) as peer:
        await add(peer, "My wife's name is Sarah")
        await call_ok(peer, "person.alias", {**ALICE, "name": "Sarah", "alias": "Sari"})
    lines = export_lines(source)
    async with serving(short_tmp / "b", target) as peer:
        await add(peer, "Sarah is my wife")  # the target learns her itself, with an id of its own
    report = import_file(target, lines, short_tmp / "dump.jsonl")
    assert "imported 0 people (0 already present, 1 merged" in report
    async with serving(short_tmp / "c", target) as peer:
        people = await call_ok(peer, "person.list", ALICE)
        assert len(people) == 1 and "Sari" in people[0]["aliases"] and people[0]["memories"] == 2
    again = import_file(target, lines, short_tmp / "dump.jsonl")
    assert "imported 0 of 1 memories (1 already present)" in again


def test_a_bad_person_line_is_named_and_nothing_is_imported(tmp_path: Path) -> None:
    header = b'{"format":"memoryd-export","version":3,"exported_at":"2026-01-01T00:00:00.000Z","user":null}\n'
    person = {"record": "person", "id": "01JC0000000000000000000000", "owner": "alice", "name": " ",
              "aliases": [], "relationship": None, "created_at": "2026-01-01T00:00:00.000Z",
              "updated_at": "2026-01-01T00:00:00.000Z", "memories": []}  # fmt: skip
    unknown = {"record": "pet", "name": "Rex"}
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(header + json.dumps(person).encode() + b"\n" + json.dumps(unknown).encode() + b"\n")
    done = memoryd("import", str(dump), data_dir=tmp_path / "data")
    assert done.returncode != 0
    assert "line 2: name " in done.stderr.decode(), text(done)
    assert "line 3: record 'pet' is not one of ['memory', 'person']" in done.stderr.decode(), text(done)
