"""The head start: the integrity check and the model load begin before the daemon is imported,
and readiness still waits for both as it did (the check at most integrity_check_wait)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from memoryd.embed import LocalEmbedder
from memoryd.errors import ConfigError, EmbedderError, StoreRefused
from memoryd.server.daemon import Daemon
from memoryd.server.head_start import HeadStart
from memoryd.store.sqlite.db.integrity import IntegrityCheck
from memoryd.store.sqlite.db.quick_check import is_wal_database, quick_check_file
from tests.conftest import make_config
from tests.disk_faults import build_store, corrupt_mid_file
from tests.wire import NdjsonPeer


def test_an_existing_wal_store_is_checked_before_anything_opens_it(tmp_path: Path) -> None:
    db = tmp_path / "memoryd.db"
    build_store(db, memories=200)
    assert is_wal_database(db)
    check = IntegrityCheck(db, busy_timeout_ms=1000)
    assert check.started_at is not None  # began in its constructor: no store, no trio
    check.join()
    assert check.finished and check.verdict == ["ok"] and not check.damaged


def test_a_missing_or_rollback_journal_file_is_checked_only_once_the_store_has_opened(tmp_path: Path) -> None:
    rollback = tmp_path / "rollback.db"
    with sqlite3.connect(rollback) as db:  # journal_mode DELETE: a read snapshot would block a migration
        db.execute("CREATE TABLE t (x)")
    damage: list[str] = []
    for path in (tmp_path / "missing.db", rollback):
        assert not is_wal_database(path)
        check = IntegrityCheck(path, busy_timeout_ms=1000)
        assert check.started_at is None and not check.finished
        if path.exists():
            check.store_opened(damage.append)
            check.join()
            assert check.verdict == ["ok"]
        check.stop()
    assert damage == []


def test_damage_found_before_the_store_opened_is_handed_over_when_it_opens(tmp_path: Path) -> None:
    db = tmp_path / "memoryd.db"
    build_store(db)
    corrupt_mid_file(db)
    check = IntegrityCheck(db, busy_timeout_ms=1000)
    check.join()
    assert check.damaged and check.verdict and check.verdict != ["ok"]
    damage: list[str] = []
    check.store_opened(damage.append)
    assert damage == [check.problems] and check.problems


def test_damage_found_after_the_store_opened_is_handed_over_once_by_the_check_itself(tmp_path: Path) -> None:
    db = tmp_path / "memoryd.db"
    build_store(db)
    corrupt_mid_file(db)
    check = IntegrityCheck(db, busy_timeout_ms=1000)
    damage: list[str] = []
    check.store_opened(damage.append)  # most likely while the check still runs; either way once
    check.join()
    assert damage == [check.problems]


def test_an_interrupt_after_the_check_ended_does_nothing(tmp_path: Path) -> None:
    db = tmp_path / "memoryd.db"
    build_store(db, memories=50)
    interrupts = []
    assert quick_check_file(db, busy_timeout_ms=1000, on_start=interrupts.append) == ["ok"]
    interrupts[0]()  # its connection is closed: harmless, no exception
    check = IntegrityCheck(db, busy_timeout_ms=1000)
    check.join()
    check.stop()
    check.stop()


def test_a_check_stopped_before_it_ran_reports_no_verdict(tmp_path: Path) -> None:
    db = tmp_path / "memoryd.db"
    db.touch()
    check = IntegrityCheck(db, busy_timeout_ms=1000)  # not WAL: waits for the store
    damage: list[str] = []
    check.stop()
    check.store_opened(damage.append)
    check.join()
    assert check.finished and check.verdict is None


async def test_a_store_damaged_before_start_is_refused_by_the_daemon(short_tmp: Path) -> None:
    config = make_config(short_tmp)
    build_store(config.db_path)
    corrupt_mid_file(config.db_path)
    head = HeadStart(config)
    # The integrity check finds the damage, or opening the file does first (the connection's
    # start-up optimize may read the damaged pages): refused as damaged either way.
    with pytest.raises(StoreRefused, match="failed its integrity check|malformed"):
        await Daemon(config, head_start=head).run()
    assert not config.socket_path.exists()


async def test_ready_means_the_model_loaded_ahead_is_loaded(short_tmp: Path) -> None:
    config = make_config(short_tmp, embedder="local")
    head = HeadStart(config)
    assert isinstance(head.embedder, LocalEmbedder)
    assert head.embedder.describe()["state"] == "loading"  # before trio, before the daemon
    daemon = Daemon(config, head_start=head)
    async with trio.open_nursery() as nursery:
        with trio.fail_after(60):
            path = await nursery.start(daemon.run)
        # The first answer after ready already has the model.
        peer = await NdjsonPeer.connect(path)
        health = (await peer.call("system.health", {}))["result"]
        assert health["embedder"]["state"] == "ready"
        assert daemon.embedder is head.embedder
        daemon.request_stop()


async def test_a_model_that_fails_to_load_ahead_stops_start_up_as_before(short_tmp: Path, tmp_path: Path) -> None:
    folder = tmp_path / "empty-model"
    folder.mkdir()
    config = make_config(short_tmp, embedder="local", embed={"model_path": str(folder)})
    head = HeadStart(config)
    with pytest.raises(EmbedderError):
        await Daemon(config, head_start=head).run()
    assert not config.socket_path.exists()


async def test_a_bad_embedder_setting_still_stops_start_up_with_its_config_error(short_tmp: Path) -> None:
    config = make_config(short_tmp, embedder="local", embed={"model_path": str(short_tmp / "no-such-folder")})
    head = HeadStart(config)  # does not raise here: start-up raises it where it always did
    assert head.embedder is None and isinstance(head.embedder_error, ConfigError)
    with pytest.raises(ConfigError, match="embed.model_path"):
        await Daemon(config, head_start=head).run()


def test_the_early_check_imports_neither_the_store_nor_numpy() -> None:
    # What the head start is for: the check begins before the heavy imports, not after them.
    probe = (
        "import sys, trio, memoryd.config; import memoryd.store.sqlite.db.integrity; "
        "print(sorted(m for m in ('memoryd.store.sqlite.store', 'memoryd.knowledge', 'numpy', 'sqlite_vec') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_name_the_store_package_exports_loads_on_first_use() -> None:
    import memoryd.store as package

    for name in package.__all__:
        assert getattr(package, name).__name__ == name
    with pytest.raises(AttributeError):
        package.NoSuchName  # noqa: B018
