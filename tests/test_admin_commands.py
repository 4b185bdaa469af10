"""`memoryd stats | gc | export | import | backup | check` as real processes on a real database file."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryd.ids import DAY_MS as DAY
from memoryd.ids import now_ms
from memoryd.store import Provenance, Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.db.database import open_connection
from tests.admin_cli import GOOD_MEMORY, export_lines, good_line, memoryd, text
from tests.store_helpers import embed_all, note, sql


def db_path(data_dir: Path) -> Path:
    return data_dir / "memoryd.db"


def open_store(data_dir: Path) -> Store:
    data_dir.mkdir(parents=True, exist_ok=True)
    return Store(db_path(data_dir), readers=1)


def query(data_dir: Path, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return sql(db_path(data_dir), statement, params)


async def embed_randomly(store: Store) -> None:
    rng = np.random.default_rng(7)
    await embed_all(store, lambda content: rng.standard_normal(4).astype(np.float32))


async def seed(data_dir: Path, *, vectors: bool = True) -> dict[str, str]:
    """Every kind of memory: personal, group, expired, deleted, retrieved, awkward text."""
    ids: dict[str, str] = {}
    with open_store(data_dir) as store:
        if vectors:
            store.configure_vector_space("test:4d", 4)

        async def add(name: str, content: str, owner: str = "alice", **kw: Any) -> None:
            record, _ = await store.memories.add(note(content, owner, **{"source": "agent", **kw}))
            ids[name] = record.id

        await add("tea", "Alice drinks green tea 🍵", subjects=["drinks", "alice"], metadata={"k": [1, {"x": None}]})
        await add("quote", 'line one\nline "two" \\ tab\t and ünïcödé 漢字', source="import", confidence=0.1 + 0.2)
        await add("group", "the team meets on mondays", chat_id="team", shared=True)
        learned = Provenance(
            chat_type="group",
            source_username="al",
            source_display_name="Alice",
            source_message_id="m-9",
            source_session="s-1",
            sensitivity="personal",
            memory_type="preference",
            conversation_private=True,
        )
        await add("bob", "bob likes chess", owner="bob", chat_id="team", provenance=learned)
        await add("expired", "a fleeting thought", expires_at_ms=now_ms() - 1000)
        await add("deleted", "deleted soon")
        assert await store.memories.delete(Scope("alice"), ids["deleted"]) == ids["deleted"]
        pinned = await store.memories.pin(Scope("alice"), ids["tea"], pinned=True)
        assert pinned is not None and pinned.pinned
        if vectors:
            await embed_randomly(store)
        await store.memories.search(Scope("alice", "team"), "tea mondays", limit=5)
        await store.lifecycle.flush_hits()
        store.lifecycle.mark_expired()
    return ids


# -- stats --------------------------------------------------------------------------------------


async def test_stats_counts_memories_by_state_scope_user_and_source(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await seed(data)
    done = memoryd("stats", "--json", data_dir=data)
    assert done.returncode == 0, text(done)
    stats = json.loads(done.stdout)
    assert stats["memories"] == {"total": 6, "active": 4, "expired": 1, "superseded": 0, "deleted": 1}
    assert stats["by_scope"]["group"]["active"] == 1 and stats["by_scope"]["chats"] == 1
    assert stats["by_scope"]["personal"] == {"active": 3, "expired": 1, "superseded": 0, "deleted": 1}
    assert {u["user"]: u["active"] for u in stats["by_user"]} == {"alice": 3, "bob": 1}
    assert stats["by_source"]["import"]["active"] == 1 and stats["by_source"]["agent"]["deleted"] == 1
    assert stats["embedding"]["model"] == "test:4d" and stats["embedding"]["embedded"] == 4
    assert stats["backlog"]["embed"] == 0
    assert stats["access"]["memories_retrieved"] == 2
    assert stats["database"]["bytes"] > 0 and stats["schema_version"] >= 2


async def test_stats_prints_a_readable_table(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await seed(data)
    done = memoryd("stats", data_dir=data)
    assert done.returncode == 0, text(done)
    out = done.stdout.decode()
    assert "memories" in out and "superseded" in out and "group (1 chat)" in out
    assert "test:4d, dim 4" in out and "backlog      embed 0, supersede 0 pending" in out
    assert str(db_path(data)) in out


def test_admin_commands_on_a_missing_database_fail_without_creating_one(tmp_path: Path) -> None:
    commands = (["stats"], ["gc"], ["export"], ["check"], ["backup", str(tmp_path / "copy.db")])
    # The processes run side by side: each only looks for the file and gives up.
    with ThreadPoolExecutor(len(commands)) as pool:
        results = list(pool.map(lambda command: memoryd(*command, data_dir=tmp_path / "nowhere"), commands))
    for command, done in zip(commands, results, strict=True):
        assert done.returncode == 1, command
        assert "no database at" in done.stderr.decode()
    assert not (tmp_path / "nowhere").exists()


# -- gc -----------------------------------------------------------------------------------------


async def test_gc_dry_run_counts_and_gc_removes_what_is_past_retention(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = await seed(data)
    long_ago = now_ms() - 40 * DAY
    query(data, "UPDATE memories SET deleted_at_ms = ? WHERE id = ?", (long_ago, ids["deleted"]))
    query(data, "UPDATE memories SET expires_at_ms = ? WHERE id = ?", (long_ago, ids["expired"]))

    dry = memoryd("gc", "--dry-run", "--json", data_dir=data)
    assert dry.returncode == 0, text(dry)
    report = json.loads(dry.stdout)
    assert report["purged"] == 2
    assert (report["purged_deleted"], report["purged_expired"], report["purged_superseded"]) == (1, 1, 0)
    assert list(report) == [  # the report's keys, in the order scripts have seen them
        "dry_run",
        "cutoff_ms",
        "purged_deleted",
        "purged_expired",
        "purged_superseded",
        "events_pruned",
        "optimize_steps",
        "seconds",
        "cutoff",
        "purged",
        "retention_days",
        "evicted",
    ]
    assert len(query(data, "SELECT id FROM memories")) == 6

    done = memoryd("gc", data_dir=data)
    assert done.returncode == 0, text(done)
    assert "removed 2 memories (1 deleted, 1 expired" in done.stdout.decode()
    assert {row[0] for row in query(data, "SELECT id FROM memories")} == set(ids.values()) - {
        ids["deleted"],
        ids["expired"],
    }
    assert memoryd("check", data_dir=data).returncode == 0
    # Retention is a config key like any other.
    short = memoryd("gc", "--json", data_dir=data, env={"MEMORYD_LIFECYCLE_RETENTION_DAYS": "0"})
    assert json.loads(short.stdout)["purged"] == 0 and json.loads(short.stdout)["retention_days"] == 0


# -- export / import ----------------------------------------------------------------------------


async def test_export_then_import_round_trips_byte_identically(tmp_path: Path) -> None:
    source = tmp_path / "source"
    await seed(source)
    exported = export_lines(source)
    header = json.loads(exported[0])
    assert header["format"] == "memoryd-export" and header["version"] == 4
    assert len(exported) == 1 + 6
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(b"".join(exported))

    target = tmp_path / "target"
    done = memoryd("import", str(dump), data_dir=target)
    assert done.returncode == 0, text(done)
    assert "imported 6 of 6 memories (0 already present)" in done.stdout.decode()
    again = export_lines(target)
    # Everything but the export time is the same, byte for byte, provenance included.
    assert again[1:] == exported[1:]
    chess = next(json.loads(line) for line in exported[1:] if b"chess" in line)
    assert (chess["chat_type"], chess["source_display_name"], chess["sensitivity"], chess["conversation_private"]) == (
        "group",
        "Alice",
        "personal",
        True,
    )
    # A pinned memory stays pinned in the importing store (and nothing else becomes pinned).
    assert {json.loads(line)["content"][:17]: json.loads(line)["pinned"] for line in again[1:]} == {
        json.loads(line)["content"][:17]: json.loads(line)["content"].startswith("Alice drinks")
        for line in exported[1:]
    }
    assert query(target, "SELECT pinned FROM memories WHERE id = ?", (json.loads(exported[1])["id"],)) in (
        [(0,)],
        [(1,)],
    )
    assert query(target, "SELECT count(*) FROM memories WHERE pinned = 1") == [(1,)]
    assert {**json.loads(again[0]), "exported_at": None} == {**header, "exported_at": None}
    assert memoryd("check", data_dir=target).returncode == 0

    # Idempotent by id.
    twice = memoryd("import", str(dump), data_dir=target)
    assert twice.returncode == 0 and "imported 0 of 6 memories (6 already present)" in twice.stdout.decode()
    assert export_lines(target)[1:] == exported[1:]


async def test_an_import_is_searchable_and_queued_for_embedding(tmp_path: Path) -> None:
    source = tmp_path / "source"
    ids = await seed(source)
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(b"".join(export_lines(source)))
    target = tmp_path / "target"
    with open_store(target) as store:
        store.configure_vector_space("test:4d", 4)
    done = memoryd("import", str(dump), data_dir=target)
    assert "4 queued for embedding" in done.stdout.decode(), text(done)  # the live ones
    with open_store(target) as store:
        hits = await store.memories.search(Scope("alice", "team"), "green tea", limit=5)
        assert [hit.id for hit in hits] == [ids["tea"]]
        assert await store.memories.list(Scope("alice"), limit=10, include_expired=True) != []
        assert (await store.jobs.backlog())["embed"] == 4


async def test_export_of_one_user_has_only_the_memories_they_added(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = await seed(data)
    lines = export_lines(data, "--user", "bob")
    assert json.loads(lines[0])["user"] == "bob"
    assert [json.loads(line)["id"] for line in lines[1:]] == [ids["bob"]]


HEADER = b'{"format":"memoryd-export","version":1,"exported_at":"2025-01-02T03:04:05.678Z","user":null}\n'


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        (b"{not json\n", "malformed"),
        (json.dumps({k: v for k, v in GOOD_MEMORY.items() if k != "content"}).encode() + b"\n", "`content`"),
        (json.dumps({**GOOD_MEMORY, "vector": [1, 2]}).encode() + b"\n", "unknown field `vector`"),
        (good_line(3, created_at="yesterday"), "created_at"),
        (good_line(3, expires_at="2025-02-30T00:00:00.000Z"), "not a valid date"),
        (good_line(3, id="not-an-id"), "not a memory id"),
        (good_line(3, scope="group"), "chat_id is required for a shared (group) memory"),
        (good_line(3, scope="world"), "`$.scope`"),
        (good_line(3, content="   "), "content must not be empty"),
        (good_line(3, confidence="high"), "`$.confidence`"),
        (good_line(1), "duplicate id"),
        (b"\xff\xfe garbage\n", "line 4"),
    ],
)
async def test_a_malformed_line_is_reported_with_its_number_and_nothing_is_imported(
    tmp_path: Path, bad_line: bytes, reason: str
) -> None:
    data = tmp_path / "data"
    with open_store(data) as store:
        await store.memories.add(note("already here", source="agent"))
    dump = tmp_path / "bad.jsonl"
    dump.write_bytes(HEADER + good_line(1) + good_line(2) + bad_line + good_line(5))
    done = memoryd("import", str(dump), data_dir=data)
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "line 4:" in err and reason in err and "nothing imported" in err
    assert query(data, "SELECT content FROM memories") == [("already here",)]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "line 1: the file is empty"),
        (b'{"format":"something-else","version":1,"exported_at":"x"}\n', "line 1: format is 'something-else'"),
        (HEADER.replace(b'"version":1', b'"version":5'), "line 1: format version 5 is not supported"),
        (good_line(1), "line 1: not a memoryd export header"),
    ],
)
def test_a_file_without_a_valid_header_is_refused(tmp_path: Path, content: bytes, reason: str) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(content)
    done = memoryd("import", str(dump), data_dir=tmp_path / "data")
    assert done.returncode == 1 and reason in done.stderr.decode(), text(done)
    assert not (tmp_path / "data").exists()


# -- backup -------------------------------------------------------------------------------------


async def test_backup_copies_a_consistent_database_and_never_overwrites(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await seed(data)
    copy = tmp_path / "backups" / "memoryd.db"
    copy.parent.mkdir()
    done = memoryd("backup", str(copy), data_dir=data)
    assert done.returncode == 0, text(done)
    assert "quick_check ok" in done.stdout.decode()
    assert not Path(f"{copy}.partial").exists() and not Path(f"{copy}-wal").exists()
    restored = tmp_path / "restored"
    restored.mkdir()
    copy.rename(restored / "memoryd.db")
    assert memoryd("check", data_dir=restored).returncode == 0
    assert export_lines(restored)[1:] == export_lines(data)[1:]

    (tmp_path / "taken.db").write_bytes(b"precious")
    refused = memoryd("backup", str(tmp_path / "taken.db"), data_dir=data)
    assert refused.returncode == 1 and "exists" in refused.stderr.decode()
    assert (tmp_path / "taken.db").read_bytes() == b"precious"
    forced = memoryd("backup", "--force", str(tmp_path / "taken.db"), data_dir=data)
    assert forced.returncode == 0, text(forced)


async def test_a_compact_backup_leaves_the_free_pages_behind_and_restores(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await seed(data)
    # Pages freed, as an upgrade (m011, m012) frees them.
    query(data, "CREATE TABLE filler AS SELECT zeroblob(100000) AS x FROM memories")
    query(data, "DROP TABLE filler")
    assert query(data, "PRAGMA freelist_count")[0][0] > 20
    plain, compact = tmp_path / "plain.db", tmp_path / "compact.db"
    assert memoryd("backup", str(plain), data_dir=data).returncode == 0
    done = memoryd("backup", "--compact", str(compact), data_dir=data)
    assert done.returncode == 0, text(done)
    assert "quick_check ok" in done.stdout.decode()
    assert compact.stat().st_size < plain.stat().st_size
    assert compact.stat().st_mode & 0o777 == 0o600
    restored = tmp_path / "restored"
    restored.mkdir()
    compact.rename(restored / "memoryd.db")
    assert query(restored, "PRAGMA freelist_count") == [(0,)]
    assert memoryd("check", data_dir=restored).returncode == 0
    assert export_lines(restored)[1:] == export_lines(data)[1:]


# -- check --------------------------------------------------------------------------------------


async def test_check_finds_index_damage_and_repair_fixes_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = await seed(data)
    assert memoryd("check", data_dir=data).returncode == 0

    db = open_connection(db_path(data), busy_timeout_ms=5000)
    with db:
        rowid, content, subjects, token = db.execute(
            "SELECT rowid, content, subjects, scope_token FROM memories WHERE id = ?", (ids["tea"],)
        ).fetchone()
        # Lose the tea memory from FTS, its vector too, and the job of another memory.
        db.execute(
            "INSERT INTO memories_fts (memories_fts, rowid, content, subjects, scope_token) VALUES ('delete', ?, ?, ?, ?)",
            (rowid, content, subjects, token),
        )
        db.execute("DELETE FROM vec_g1 WHERE memory_rowid = ?", (rowid,))
        # And leave a vector behind for the deleted memory.
        deleted_rowid = db.execute("SELECT rowid FROM memories WHERE id = ?", (ids["deleted"],)).fetchone()[0]
        db.execute(
            "INSERT INTO vec_g1 (memory_rowid, scope_key, expires_at, disclosure, learned_chat, coarse) "
            "VALUES (?, 'u:alice', 1, 0, '', vec_bit(x'f0'))",
            (deleted_rowid,),
        )
    db.close()

    found = memoryd("check", "--json", data_dir=data)
    assert found.returncode == 1
    report = json.loads(found.stdout)
    failed = {c["check"] for c in report["checks"] if not c["ok"]}
    assert {"fts.documents", "vectors.rows"} <= failed
    plain = memoryd("check", data_dir=data)
    assert "PROBLEM" in plain.stdout.decode() and "memoryd check --repair" in plain.stdout.decode()

    repaired = memoryd("check", "--repair", data_dir=data)
    assert repaired.returncode == 0, text(repaired)
    out = repaired.stdout.decode()
    assert "rebuilt the FTS index" in out and "to re-embed" in out and "queued 1 embed jobs" in out
    assert memoryd("check", data_dir=data).returncode == 0
    with open_store(data) as store:
        hits = await store.memories.search(Scope("alice"), "green tea", limit=5)
        assert [hit.id for hit in hits] == [ids["tea"]]
        assert (await store.jobs.backlog())["embed"] == 1  # the tea memory is re-embedded
