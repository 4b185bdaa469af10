"""Opening a PostgreSQL store: several daemons migrating an empty database at once migrate it
once; a server that cannot be reached is refused with a message that never shows the password;
the password comes from a file."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from memoryd.errors import StoreRefused
from tests.postgres_server import shared

pytest.importorskip("psycopg")

from memoryd.store.postgres import PostgresStore, schema  # noqa: E402
from memoryd.store.postgres.db import password_from, redacted  # noqa: E402


def test_daemons_starting_at_once_on_an_empty_database_migrate_it_once() -> None:
    url = shared().fresh_database()
    opened: list[PostgresStore] = []
    failures: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(PostgresStore(url, pool_size=1))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert failures == [] and len(opened) == 6
        versions = opened[0].db.run_sync(
            lambda conn: conn.execute("SELECT version FROM memoryd_schema ORDER BY version").fetchall()
        )
        assert [v for (v,) in versions] == list(range(1, len(schema.MIGRATIONS) + 1))
    finally:
        for store in opened:
            store.close()


def test_an_unreachable_server_is_refused_without_showing_the_password(tmp_path: Path) -> None:
    url = f"postgresql://memoryd:s3cret-pw@/memoryd?host={tmp_path}&connect_timeout=2"
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(url, pool_size=1)
    assert "s3cret-pw" not in str(refused.value) and "could not be reached" in str(refused.value)
    assert "s3cret-pw" not in redacted(url) and "***" in redacted(url)
    assert "s3cret-pw" not in redacted("host=db password=s3cret-pw dbname=memoryd")
    # libpq's keyword strings allow spaces around '=' and quoted values with spaces.
    assert redacted("host=db password = s3cret-pw dbname=memoryd") == "host=db password = *** dbname=memoryd"
    assert redacted("host=db password='s3cret pw' dbname=memoryd") == "host=db password=*** dbname=memoryd"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://memoryd:s3cret-pw@/memoryd?host=/nowhere&no_such_option=1",
        "host=/nowhere password=s3cret-pw dbname",
    ],
)
def test_a_url_libpq_cannot_read_is_refused_naming_the_key_without_the_password(url: str) -> None:
    with pytest.raises(StoreRefused, match="storage.url is not a libpq connection") as refused:
        PostgresStore(url, pool_size=1)
    assert "s3cret-pw" not in str(refused.value)


def test_the_password_comes_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-the-file\n")
    assert password_from(str(secret)) == "from-the-file"
    assert password_from("") is None
    with pytest.raises(StoreRefused, match="password_file"):
        password_from(str(tmp_path / "missing"))


@pytest.mark.usefixtures("no_memoryd_env")
def test_memoryd_config_never_prints_the_database_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import json

    from memoryd.cli import main

    monkeypatch.setenv("MEMORYD_STORAGE_BACKEND", "postgres")
    monkeypatch.setenv(
        "MEMORYD_STORAGE_URL", "postgresql://memoryd:pg-secret-42@db.internal/memoryd?sslmode=verify-full"
    )
    monkeypatch.setenv("MEMORYD_DATA_DIR", str(tmp_path))
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "pg-secret-42" not in out
    assert json.loads(out)["storage"]["url"] == "postgresql://memoryd:***@db.internal/memoryd?sslmode=verify-full"


@pytest.mark.parametrize(
    ("floor", "message"),
    [(("MIN_SERVER", 99), "PostgreSQL 1[5-9] is too old: memoryd needs PostgreSQL 99"),
     (("MIN_VECTOR", (99, 0)), r"pgvector 0\.\d+\.\d+ is too old: memoryd needs pgvector 99\.0")],
)  # fmt: skip
def test_a_server_or_pgvector_older_than_memoryd_needs_is_refused_naming_both_versions(
    monkeypatch: pytest.MonkeyPatch, floor: tuple[str, object], message: str
) -> None:
    """The real server's versions against a floor raised above them (no older server is at hand)."""
    from memoryd.store.postgres import server_versions

    monkeypatch.setattr(server_versions, *floor)
    url = shared().fresh_database()
    with pytest.raises(StoreRefused, match=message):
        PostgresStore(url, pool_size=1)
    import psycopg

    with psycopg.connect(url) as conn:  # refused before anything was written
        assert conn.execute("SELECT to_regclass('memoryd_schema')").fetchone() == (None,)


async def test_a_database_from_before_the_health_tallies_counts_its_memories_when_it_migrates() -> None:
    """Schema v5 keeps system.health's memory counts as the writes' own tallies: a database of
    v4 with memories gets them counted once when it migrates (and again, not twice, should the
    step run again), and every write from then on adds its own."""
    from memoryd.store import NewMemory, Scope

    with PostgresStore(shared().fresh_database(), pool_size=1) as store:
        added = [
            (
                await store.memories.add(
                    NewMemory(content=f"note {i}", owner="alice", chat_id=None, shared=False, source="t")
                )
            )[0]
            for i in range(4)
        ]
        await store.memories.delete(Scope("alice"), added[0].id)

        def downgrade(conn: Any) -> None:
            for trigger in ("insert", "delete", "update"):
                conn.execute(f"DROP TRIGGER memory_counts_{trigger} ON memories")
            conn.execute("DROP TABLE memory_counts")
            conn.execute("DROP INDEX memories_live_expiry")
            conn.execute("DELETE FROM memoryd_schema WHERE version > 4")

        store.db.run_sync(downgrade)
        await store.memories.add(
            NewMemory(content="written by v4", owner="bob", chat_id=None, shared=False, source="t")
        )
        assert store.db.run_sync(schema.migrate) == len(schema.MIGRATIONS)
        counts = await store.memories.health_counts()
        assert (counts["memories_active"], counts["memories_deleted"]) == (4, 1)
        store.db.run_sync(lambda conn: conn.execute(schema.M005))  # run again: counted afresh
        await store.memories.add(NewMemory(content="after", owner="bob", chat_id=None, shared=False, source="t"))
        counts = await store.memories.health_counts()
        assert (counts["memories_active"], counts["memories_deleted"]) == (5, 1)


def test_a_transaction_rolled_back_as_a_deadlock_is_run_again() -> None:
    """Two transactions locking two rows in opposite orders: the server rolls one back as a
    deadlock (40P01), and ``run_sync`` runs it again instead of failing the call."""
    import threading

    import psycopg

    from memoryd.errors import StoreConflict
    from memoryd.store.postgres.db import CONFLICT_TRIES

    store = PostgresStore(shared().fresh_database(), pool_size=2)
    pg_db = store.db

    pg_db.run_sync(lambda conn: conn.execute("CREATE TABLE IF NOT EXISTS deadlock_probe (k int PRIMARY KEY, v int)"))
    pg_db.run_sync(
        lambda conn: conn.execute(
            "INSERT INTO deadlock_probe VALUES (1, 0), (2, 0) ON CONFLICT (k) DO UPDATE SET v = 0"
        )
    )
    both_hold_one = threading.Barrier(2, timeout=10)
    tries: list[int] = []

    def locker(first: int, second: int) -> None:
        def transaction(conn: Any) -> None:
            tries.append(first)
            conn.execute("UPDATE deadlock_probe SET v = v + 1 WHERE k = %s", (first,))
            if len([t for t in tries if t == first]) == 1:
                both_hold_one.wait()  # only the first try of each meets the other half-way
            conn.execute("UPDATE deadlock_probe SET v = v + 1 WHERE k = %s", (second,))

        pg_db.run_sync(transaction)

    threads = [threading.Thread(target=locker, args=order) for order in ((1, 2), (2, 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # Both committed: each row was raised once by each transaction, and one of them ran twice.
    values = pg_db.run_sync(lambda conn: conn.execute("SELECT v FROM deadlock_probe ORDER BY k").fetchall())
    assert [v for (v,) in values] == [2, 2]
    assert len(tries) == 3

    def always_deadlocks(conn: Any) -> None:
        raise psycopg.errors.DeadlockDetected("deadlock detected")

    try:
        with pytest.raises(StoreConflict, match=f"on {CONFLICT_TRIES} tries"):
            pg_db.run_sync(always_deadlocks)
    finally:
        store.close()


async def test_a_background_worker_pauses_on_a_conflict_that_outlasted_the_retries(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker (the embedding backfill, extraction, supersession) whose transaction deadlocked
    on every try pauses and runs again, as on an unreachable server: it once took the daemon down
    with it (a supersession job completing while an erasure of its scope ran)."""
    import logging

    import psycopg
    import trio

    from memoryd.server import pausing

    monkeypatch.setattr(pausing, "STORAGE_RETRY_SECONDS", 0.01)
    caplog.set_level(logging.DEBUG, logger="memoryd.daemon")
    store = PostgresStore(shared().fresh_database(), pool_size=2)
    runs: list[int] = []
    again = trio.Event()

    def always_deadlocks(conn: Any) -> None:
        raise psycopg.errors.DeadlockDetected("deadlock detected")

    async def worker() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            await store.db.run(always_deadlocks)
        again.set()
        await trio.sleep_forever()

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(pausing.despite_storage_faults, worker)
            with trio.fail_after(10):
                await again.wait()
            nursery.cancel_scope.cancel()
    finally:
        store.close()
    assert runs == [0, 1]
    assert "worker.paused" in caplog.text


@pytest.mark.parametrize("command", [["serve"], ["stats"], ["gc", "--dry-run"]])
def test_the_postgres_backend_without_a_url_is_a_usage_error_naming_the_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    import os

    from memoryd.cli import main

    for name in [name for name in os.environ if name.startswith("MEMORYD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORYD_STORAGE_BACKEND", "postgres")
    monkeypatch.setenv("MEMORYD_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEMORYD_SOCKET", str(tmp_path / "memoryd.sock"))
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "[storage] url" in err and "MEMORYD_STORAGE_URL" in err
    assert "Traceback" not in err
